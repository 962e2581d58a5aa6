//! NTLM against [MS-NLMP] 4.2.4 and a captured Windows exchange.

mod common;

use common::*;
use smbx_security::ntlm::{self, *};
use smbx_security::spnego::{self, NegState, NegotiationToken};

const SERVER_CHALLENGE: [u8; 8] = [0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef];
const CLIENT_CHALLENGE: [u8; 8] = [0xaa; 8];
const RANDOM_SESSION_KEY: [u8; 16] = [0x55; 16];

/// MS-NLMP 4.2.4.1.3 target info: NbDomainName "Domain", NbComputerName "Server", EOL.
fn nlmp_target_info() -> Vec<u8> {
    unhex("02000c0044006f006d00610069006e0001000c0053006500720076006500720000000000")
}

#[test]
fn nlmp_4_2_4_ntowfv2_and_responses() {
    let nt = nt_hash("Password");
    assert_eq!(hex::encode(nt), "a4f49c406510bdcab6824ee7c30fd852");
    let owf = ntowfv2(&nt, "User", "Domain");
    assert_eq!(hex::encode(owf), "0c868a403bfd7a93a3001ef22ef02e3f");
    // user name is upper-cased, domain is not
    assert_eq!(ntowfv2(&nt, "user", "Domain"), owf);
    assert_ne!(ntowfv2(&nt, "User", "DOMAIN"), owf);

    let lm = lmv2_response(&owf, &SERVER_CHALLENGE, &CLIENT_CHALLENGE);
    assert_eq!(
        hex::encode(lm),
        "86c35097ac9cec102554764a57cccc19aaaaaaaaaaaaaaaa"
    );

    let blob = ntlmv2_blob(0, &CLIENT_CHALLENGE, &nlmp_target_info());
    let proof = nt_proof_str(&owf, &SERVER_CHALLENGE, &blob);
    assert_eq!(hex::encode(proof), "68cd0ab851e51c96aabc927bebef6a1c");
    let base = session_base_key(&owf, &proof);
    assert_eq!(hex::encode(base), "8de40ccadbc14a82f15cb0ad0de95ca3");
    let enc = rc4(&base, &RANDOM_SESSION_KEY);
    assert_eq!(hex::encode(&enc), "c5dad2544fc9799094ce1ce90bc9d03e");
    // RC4 is its own inverse: the server recovers the exported key.
    assert_eq!(rc4(&base, &enc), RANDOM_SESSION_KEY);

    let flags = NEGOTIATE_128 | NEGOTIATE_KEY_EXCH | NEGOTIATE_EXTENDED_SESSIONSECURITY;
    assert_eq!(
        hex::encode(sign_key(&RANDOM_SESSION_KEY, true)),
        "4788dc861b4782f35d43fd98fe1a2d39"
    );
    assert_eq!(
        hex::encode(seal_key(&RANDOM_SESSION_KEY, flags, true)),
        "59f600973cc4960a25480a7c196e4c58"
    );
}

#[test]
fn initiator_reproduces_nlmp_vector() {
    let ch = ChallengeMessage {
        flags: NEGOTIATE_UNICODE
            | NEGOTIATE_NTLM
            | NEGOTIATE_EXTENDED_SESSIONSECURITY
            | NEGOTIATE_TARGET_INFO
            | NEGOTIATE_128
            | NEGOTIATE_KEY_EXCH,
        target_name: "Server".into(),
        server_challenge: SERVER_CHALLENGE,
        target_info: nlmp_target_info(),
        version: None,
    };
    let mut init = Initiator::new("User", "Password", "Domain").with_fixed_randomness(
        CLIENT_CHALLENGE,
        RANDOM_SESSION_KEY,
        0,
    );
    init.negotiate();
    let (msg, key) = init.authenticate(&ch.encode()).unwrap();
    assert_eq!(key, RANDOM_SESSION_KEY);
    let a = AuthenticateMessage::decode(&msg).unwrap();
    assert_eq!(a.user, "User");
    assert_eq!(a.domain, "Domain");
    assert_eq!(
        hex::encode(&a.nt_response),
        concat!(
            "68cd0ab851e51c96aabc927bebef6a1c",
            "01010000000000000000000000000000aaaaaaaaaaaaaaaa00000000",
            "02000c0044006f006d00610069006e0001000c0053006500720076006500720000000000",
            "00000000"
        )
    );
    assert_eq!(
        hex::encode(&a.lm_response),
        "86c35097ac9cec102554764a57cccc19aaaaaaaaaaaaaaaa"
    );
    assert_eq!(
        hex::encode(&a.encrypted_session_key),
        "c5dad2544fc9799094ce1ce90bc9d03e"
    );
}

#[test]
fn windows_capture_messages_decode() {
    let req1 = unhex(SETUP_REQ1);
    let NegotiationToken::Init(init) = spnego::decode(req_token(&req1)).unwrap() else {
        panic!("expected NegTokenInit");
    };
    assert_eq!(init.mech_types, vec![spnego::OID_NTLMSSP.to_vec()]);
    let neg_bytes = init.mech_token.unwrap();
    let neg = NegotiateMessage::decode(&neg_bytes).unwrap();
    assert_eq!(neg.flags, 0xe2088297);

    let resp1 = unhex(SETUP_RESP1);
    let NegotiationToken::Resp(r) = spnego::decode(resp_token(&resp1)).unwrap() else {
        panic!("expected NegTokenResp");
    };
    assert_eq!(r.neg_state, Some(NegState::AcceptIncomplete));
    assert_eq!(r.supported_mech.as_deref(), Some(spnego::OID_NTLMSSP));
    let chal_bytes = r.response_token.unwrap();
    let ch = ChallengeMessage::decode(&chal_bytes).unwrap();
    assert_eq!(hex::encode(ch.server_challenge), "0d1d8ba31179d008");
    assert_eq!(ch.target_name, "SUT311");
    let ti = AvPairs::decode(&ch.target_info).unwrap();
    assert_eq!(
        ti.timestamp(),
        Some(u64::from_le_bytes(
            unhex("A1A1F5ADCBAED001").try_into().unwrap()
        ))
    );

    let req2 = unhex(SETUP_REQ2);
    let NegotiationToken::Resp(r) = spnego::decode(req_token(&req2)).unwrap() else {
        panic!("expected NegTokenResp");
    };
    let auth_bytes = r.response_token.unwrap();
    let client_mic = r.mech_list_mic.unwrap();
    let a = AuthenticateMessage::decode(&auth_bytes).unwrap();
    assert_eq!(a.user, "administrator");
    assert_eq!(a.domain, "SUT311");
    assert_eq!(a.workstation, "DRIVER311");
    assert_eq!(a.nt_response.len(), 0xee);
    assert_eq!(a.ntlmv2_av_pairs().unwrap().flags(), Some(2));

    // KEY_EXCH: ExportedSessionKey = RC4(KeyExchangeKey, EncryptedRandomSessionKey).
    let base: [u8; 16] = unhex(SESSION_BASE_KEY).try_into().unwrap();
    let esk: [u8; 16] = rc4(&base, &a.encrypted_session_key).try_into().unwrap();
    assert_eq!(esk.to_vec(), unhex(SESSION_KEY));

    // The AUTHENTICATE MIC over the three messages.
    let mut zeroed = auth_bytes.clone();
    zeroed[MIC_OFFSET..MIC_OFFSET + 16].fill(0);
    let mic = compute_mic(&esk, &neg_bytes, &chal_bytes, &zeroed);
    assert_eq!(Some(mic), a.mic);
    let mut bad = zeroed.clone();
    bad[100] ^= 1;
    assert_ne!(
        Some(compute_mic(&esk, &neg_bytes, &chal_bytes, &bad)),
        a.mic
    );

    // The SPNEGO mechListMIC in both directions.
    let types = init_mech_types_der();
    let mut s = NtlmSession::new(&esk, a.flags);
    assert!(s.verify_c2s(&types, &client_mic));
    let resp2 = unhex(SETUP_RESP2);
    let NegotiationToken::Resp(fin) = spnego::decode(resp_token(&resp2)).unwrap() else {
        panic!("expected NegTokenResp");
    };
    assert_eq!(fin.neg_state, Some(NegState::AcceptCompleted));
    assert_eq!(fin.mech_list_mic.as_deref(), Some(&s.sign_s2c(&types)[..]));
    // a second signature uses the next sequence number and the advanced RC4 state
    let mut s2 = NtlmSession::new(&esk, a.flags);
    let _ = s2.sign_s2c(&types);
    assert_ne!(fin.mech_list_mic.as_deref(), Some(&s2.sign_s2c(&types)[..]));
}

fn init_mech_types_der() -> Vec<u8> {
    spnego::ntlm_only_mech_types_der()
}

#[test]
fn message_roundtrips() {
    let n = NegotiateMessage {
        flags: INITIATOR_FLAGS | NEGOTIATE_OEM_DOMAIN_SUPPLIED,
        domain: "DOM".into(),
        workstation: "WS".into(),
        version: Some(OUR_VERSION),
    };
    assert_eq!(NegotiateMessage::decode(&n.encode()).unwrap(), n);
    let c = ChallengeMessage {
        flags: NEGOTIATE_UNICODE | NEGOTIATE_VERSION,
        target_name: "SRV".into(),
        server_challenge: [7; 8],
        target_info: AvPairs(vec![(ntlm::av::NB_COMPUTER_NAME, vec![1, 2])]).encode(),
        version: Some(OUR_VERSION),
    };
    assert_eq!(ChallengeMessage::decode(&c.encode()).unwrap(), c);
    let a = AuthenticateMessage {
        flags: NEGOTIATE_UNICODE | NEGOTIATE_VERSION,
        lm_response: vec![0; 24],
        nt_response: vec![9; 60],
        domain: "d".into(),
        user: "ü".into(),
        workstation: "w".into(),
        encrypted_session_key: vec![3; 16],
        version: Some(OUR_VERSION),
        mic: Some([5; 16]),
    };
    assert_eq!(AuthenticateMessage::decode(&a.encode()).unwrap(), a);
}

#[test]
fn decoders_reject_bad_offsets() {
    let c = ChallengeMessage {
        flags: NEGOTIATE_UNICODE,
        target_name: "SRV".into(),
        server_challenge: [7; 8],
        target_info: vec![0, 0, 0, 0],
        version: None,
    };
    let mut b = c.encode();
    // target name offset points past the end
    b[16..20].copy_from_slice(&0xffff_fff0u32.to_le_bytes());
    assert!(ChallengeMessage::decode(&b).is_err());
    assert!(AuthenticateMessage::decode(b"NTLMSSP\0\x03\0\0\0").is_err());
    assert!(NegotiateMessage::decode(b"NTLMSSP\0\x02\0\0\0\0\0\0\0").is_err());
    assert!(AvPairs::decode(&[1, 0, 10, 0, 1]).is_err());
    assert!(AvPairs::decode(&[1, 0, 0, 0]).is_err(), "missing EOL");
}

mod props {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn ntlm_decoders_never_panic(mut data in proptest::collection::vec(any::<u8>(), 0..400), ty in 1u8..4) {
            if data.len() >= 12 {
                data[..8].copy_from_slice(SIGNATURE);
                data[8] = ty; data[9] = 0; data[10] = 0; data[11] = 0;
            }
            let _ = NegotiateMessage::decode(&data);
            let _ = ChallengeMessage::decode(&data);
            let _ = AuthenticateMessage::decode(&data).map(|a| a.ntlmv2_av_pairs());
            let _ = AvPairs::decode(&data);
        }

        #[test]
        fn truncated_capture_never_panics(cut in 0usize..0x1a6) {
            let req2 = unhex(SETUP_REQ2);
            let tok = req_token(&req2);
            let NegotiationToken::Resp(r) = spnego::decode(tok).unwrap() else { panic!() };
            let auth = r.response_token.unwrap();
            let _ = AuthenticateMessage::decode(&auth[..cut.min(auth.len())]);
        }
    }
}

#[test]
fn ntlmv2_response_decoding() {
    let blob = ntlmv2_blob(
        0x0102_0304_0506_0708,
        &CLIENT_CHALLENGE,
        &nlmp_target_info(),
    );
    let mut resp = vec![0x5a; 16];
    resp.extend_from_slice(&blob);
    let v2 = Ntlmv2Response::decode(&resp).unwrap();
    assert_eq!(v2.nt_proof_str, [0x5a; 16]);
    let c = &v2.client_challenge;
    assert_eq!((c.resp_type, c.hi_resp_type), (1, 1));
    assert_eq!(c.timestamp, 0x0102_0304_0506_0708);
    assert_eq!(c.challenge_from_client, CLIENT_CHALLENGE);
    assert_eq!(
        c.av_pairs,
        AvPairs::decode(&nlmp_target_info()).unwrap(),
        "AvPairs as in the target info"
    );
    // Truncated anywhere: an error, never a panic.
    for n in 0..resp.len() - 4 {
        assert!(Ntlmv2Response::decode(&resp[..n]).is_err(), "len {n}");
    }
    // An AvLen past the end, or no MsvAvEOL.
    let mut bad = resp[..44].to_vec();
    bad.extend_from_slice(&[0x01, 0x00, 0xff, 0x7f, 0x41]);
    assert!(Ntlmv2Response::decode(&bad).is_err());
    let mut no_eol = resp[..44].to_vec();
    no_eol.extend_from_slice(&[0x01, 0x00, 0x02, 0x00, 0x41, 0x00]);
    assert!(Ntlmv2Response::decode(&no_eol).is_err());
}
