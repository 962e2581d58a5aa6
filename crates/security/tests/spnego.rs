//! SPNEGO DER against captured Windows tokens and hostile input.

mod common;

use common::*;
use smbx_security::spnego::*;

/// The NegTokenInit2 from a Windows Server NEGOTIATE response (captured in Microsoft's
/// published 3.1.1 example): mechTypes [NEGOEX, NTLMSSP] and a NEGOEX mechToken.
const WINDOWS_NEG_RESP_TOKEN_PREFIX: &str =
    "6082013C06062B0601050502A08201303082012CA01A3018060A2B06010401823702021E060A2B06010401823702020AA282010C04820108";

#[test]
fn windows_client_negtokeninit() {
    let req1 = unhex(SETUP_REQ1);
    let tok = req_token(&req1);
    // The exact bytes, then the decoded structure.
    assert_eq!(
        hex::encode_upper(tok),
        "604806062B0601050502A03E303CA00E300C060A2B06010401823702020AA22A04284E544C4D5353500001000000978208E200000000000000000000000000000000060380250000000F"
    );
    let NegotiationToken::Init(i) = decode(tok).unwrap() else {
        panic!()
    };
    assert_eq!(i.mech_types, vec![OID_NTLMSSP.to_vec()]);
    assert_eq!(i.mech_token.as_ref().unwrap().len(), 40);
    assert_eq!(i.mech_types_der(), unhex("300C060A2B06010401823702020A"));
    // Re-encoding gives the same bytes.
    assert_eq!(encode_init(&i), tok);
}

#[test]
fn windows_negtokeninit2_header() {
    // Only the header survives in our test data; the full token is a NEGOEX blob of 0x108 bytes.
    let mut t = unhex(WINDOWS_NEG_RESP_TOKEN_PREFIX);
    t.extend(std::iter::repeat_n(0u8, 0x108));
    let NegotiationToken::Init(i) = decode(&t).unwrap() else {
        panic!()
    };
    assert_eq!(
        i.mech_types,
        vec![OID_NEGOEX.to_vec(), OID_NTLMSSP.to_vec()]
    );
    assert_eq!(i.mech_token.unwrap().len(), 0x108);
    t.push(0);
    assert!(decode(&t).is_err(), "trailing byte");
}

#[test]
fn windows_final_negtokenresp() {
    let resp2 = unhex(SETUP_RESP2);
    let t = resp_token(&resp2);
    let NegotiationToken::Resp(r) = decode(t).unwrap() else {
        panic!()
    };
    assert_eq!(r.neg_state, Some(NegState::AcceptCompleted));
    assert_eq!(r.supported_mech, None);
    assert_eq!(r.response_token, None);
    assert_eq!(r.mech_list_mic.as_ref().unwrap().len(), 16);
    assert_eq!(encode_resp(&r), t);
}

#[test]
fn negtokeninit2_roundtrip_and_layout() {
    let t = server_init_token();
    // 60 len 06 06 <spnego> a0 len 30 len a0 0e 30 0c 06 0a <ntlmssp> a3 ...
    assert_eq!(t[0], 0x60);
    assert_eq!(&t[4..10], OID_SPNEGO);
    let NegotiationToken::Init(i) = decode(&t).unwrap() else {
        panic!()
    };
    assert_eq!(
        i.neg_hints.as_ref().unwrap().hint_name.as_deref(),
        Some(HINT_NAME)
    );
    assert_eq!(i.mech_list_mic, None);
    assert_eq!(encode_init(&i), t);
    let with_mic = NegTokenInit {
        mech_list_mic: Some(vec![1, 2, 3]),
        ..i.clone()
    };
    assert_eq!(
        decode(&encode_init(&with_mic)).unwrap(),
        NegotiationToken::Init(with_mic)
    );
}

#[test]
fn long_lengths_roundtrip() {
    for n in [0usize, 1, 127, 128, 255, 256, 65535, 65536, 70000] {
        let r = NegTokenResp {
            neg_state: Some(NegState::AcceptIncomplete),
            supported_mech: Some(OID_NTLMSSP.to_vec()),
            response_token: Some(vec![0xab; n]),
            mech_list_mic: Some(vec![1; 16]),
        };
        assert_eq!(decode(&encode_resp(&r)).unwrap(), NegotiationToken::Resp(r));
    }
}

#[test]
fn rejects_malformed() {
    let good = server_init_token();
    for cut in 0..good.len() {
        assert!(decode(&good[..cut]).is_err(), "truncated at {cut}");
    }
    // indefinite length
    assert!(decode(&[0xa1, 0x80, 0x30, 0x00, 0x00, 0x00]).is_err());
    // length larger than the buffer
    assert!(decode(&[0xa1, 0x84, 0xff, 0xff, 0xff, 0xff]).is_err());
    // wrong OID in the GSS wrapper
    assert!(decode(&unhex("600a06022a03a0043002a000")).is_err());
    // unknown negState
    assert!(decode(&unhex("a1073005a0030a0109")).is_err());
    // inner length overruns its parent
    assert!(decode(&unhex("a1053003a0040a0100")).is_err());
}

mod props {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn random_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = decode(&data);
        }

        #[test]
        fn mutated_tokens_never_panic(idx in 0usize..200, val in any::<u8>(), cut in 0usize..200) {
            let resp1 = unhex(SETUP_RESP1);
            let mut t = resp_token(&resp1).to_vec();
            let i = idx % t.len();
            t[i] = val;
            t.truncate(cut.max(1));
            let _ = decode(&t);
        }

        #[test]
        fn resp_roundtrip(state in 0u8..4, tok in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..600)),
                          mic in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..40))) {
            let st = [NegState::AcceptCompleted, NegState::AcceptIncomplete, NegState::Reject, NegState::RequestMic][state as usize];
            let r = NegTokenResp { neg_state: Some(st), supported_mech: None, response_token: tok, mech_list_mic: mic };
            prop_assert_eq!(decode(&encode_resp(&r)).unwrap(), NegotiationToken::Resp(r));
        }
    }
}
