//! KDF, key schedule, preauth hash, signing, ciphers and the transform header against
//! published vectors ([MS-SMB2] blog examples, RFC 4493, the GCM specification).

mod common;

use common::*;
use smbx_security::cipher::{CipherId, Sealer};
use smbx_security::kdf::smb3_kdf;
use smbx_security::keys::derive;
use smbx_security::preauth::PreauthHash;
use smbx_security::signing::{aes_cmac, Signer, SigningAlgorithm};
use smbx_security::transform::{self, NonceSource, TRANSFORM_HEADER_LEN};
use smbx_security::CryptoError;
use smbx_wire::Dialect;

fn h(s: &str) -> String {
    s.to_ascii_lowercase()
}

fn preauth(s: &str) -> [u8; 64] {
    unhex(s).try_into().unwrap()
}

#[test]
fn kdf_smb30_vectors() {
    // "SMB 2 and SMB 3 security in Windows 10" appendix, SMB 3.0 multichannel example.
    let sk = unhex("7CD451825D0450D235424E44BA6E78CC");
    let k = derive(Dialect::SMB3_0, &sk, None, None);
    assert_eq!(
        hex::encode(&k.signing),
        h("0B7E9C5CAC36C0F6EA9AB275298CEDCE")
    );
    // The blog lists client keys: its EncryptionKey is what the server decrypts with.
    assert_eq!(
        hex::encode(&k.decrypt_c2s),
        h("FAD27796665B313EBB578F388632B4F7")
    );
    assert_eq!(
        hex::encode(&k.encrypt_s2c),
        h("B0F0427F7CEB416D1D9DCC0CD4F99447")
    );
    assert_eq!(
        hex::encode(&k.application),
        h("BB23A4575AA26C721AF525AF15A87B4F")
    );
    // second channel's signing key
    let k2 = derive(
        Dialect::SMB3_0_2,
        &unhex("4E01A2B313BCF660CC250BEF021AEDE6"),
        None,
        None,
    );
    assert_eq!(
        hex::encode(&k2.signing),
        h("BA1A17DBBFEC349BCA105563D598952F")
    );
    // "Encryption in SMB 3.0: a protocol perspective" example.
    let k3 = derive(
        Dialect::SMB3_0,
        &unhex("B4546771B515F766A86735532DD6C4F0"),
        None,
        None,
    );
    assert_eq!(
        hex::encode(&k3.signing),
        h("F773CD23C18FD1E08EE510CADA7CF852")
    );
    assert_eq!(
        hex::encode(&k3.decrypt_c2s),
        h("261B72350558F2E9DCF613070383EDBF")
    );
    assert_eq!(
        hex::encode(&k3.encrypt_s2c),
        h("8FE2B57EC34D2DB5B1A9727F526BBDB5")
    );
    assert_eq!(
        hex::encode(&k3.application),
        h("77432F808CE99156B5BC6A3676D730D1")
    );
    // The raw KDF call with the labels as the spec lists them.
    assert_eq!(
        hex::encode(smb3_kdf(&sk, b"SMB2AESCMAC\0", b"SmbSign\0", 128)),
        h("0B7E9C5CAC36C0F6EA9AB275298CEDCE")
    );
}

#[test]
fn kdf_smb311_vectors() {
    let sk = unhex(SESSION_KEY);
    let ctx = preauth(PREAUTH_FINAL);
    for c in [None, Some(CipherId::Aes128Gcm), Some(CipherId::Aes128Ccm)] {
        let k = derive(Dialect::SMB3_1_1, &sk, Some(&ctx), c);
        assert_eq!(hex::encode(&k.signing), h(SIGNING_KEY_311));
        assert_eq!(hex::encode(&k.decrypt_c2s), h(ENCRYPTION_KEY_311));
        assert_eq!(hex::encode(&k.encrypt_s2c), h(DECRYPTION_KEY_311));
        assert_eq!(hex::encode(&k.application), h(APPLICATION_KEY_311));
    }
    // 256-bit ciphers: 32-byte encryption keys (L = 256), signing key unchanged.
    let k = derive(
        Dialect::SMB3_1_1,
        &sk,
        Some(&ctx),
        Some(CipherId::Aes256Gcm),
    );
    assert_eq!(k.decrypt_c2s.len(), 32);
    assert_eq!(k.encrypt_s2c.len(), 32);
    assert_eq!(hex::encode(&k.signing), h(SIGNING_KEY_311));
    assert_eq!(
        k.decrypt_c2s,
        smb3_kdf(&sk, b"SMBC2SCipherKey\0", &ctx, 256)
    );
    assert_ne!(
        &k.decrypt_c2s[..16],
        &unhex(ENCRYPTION_KEY_311)[..],
        "L is part of the input"
    );
    // A different preauth hash gives different keys.
    let k0 = derive(Dialect::SMB3_1_1, &sk, Some(&[0; 64]), None);
    assert_ne!(hex::encode(&k0.signing), h(SIGNING_KEY_311));
}

#[test]
fn smb2_signing_key_is_session_key() {
    let sk = unhex(SESSION_KEY);
    for d in [Dialect::SMB2_0_2, Dialect::SMB2_1] {
        let k = derive(d, &sk, None, None);
        assert_eq!(k.signing, sk);
        assert!(k.encrypt_s2c.is_empty() && k.decrypt_c2s.is_empty());
    }
}

#[test]
fn preauth_hash_chain_matches_capture() {
    let mut p = PreauthHash::from_value(preauth(PREAUTH_BEFORE_REQ1));
    p.update(&unhex(SETUP_REQ1));
    assert_eq!(hex::encode(p.value()), h(PREAUTH_AFTER_REQ1));
    let mut p = PreauthHash::from_value(preauth(PREAUTH_BEFORE_REQ2));
    p.update(&unhex(SETUP_REQ2));
    assert_eq!(hex::encode(p.value()), h(PREAUTH_FINAL));
    assert_eq!(PreauthHash::new().value(), &[0u8; 64]);
}

#[test]
fn cmac_signature_of_windows_session_setup_response() {
    let resp = unhex(SETUP_RESP2);
    let s = Signer::new(SigningAlgorithm::AesCmac, &unhex(SIGNING_KEY_311));
    assert_eq!(
        hex::encode(s.signature(&resp)),
        h("EBE146DA120BA25FC3376A49DFE31BC1")
    );
    assert!(s.verify(&resp));
    let mut copy = resp.clone();
    copy[48..64].fill(0);
    s.sign(&mut copy);
    assert_eq!(copy, resp);
    let mut bad = resp.clone();
    *bad.last_mut().unwrap() ^= 1;
    assert!(!s.verify(&bad));
    assert!(!Signer::new(SigningAlgorithm::AesCmac, &[1; 16]).verify(&resp));
}

#[test]
fn rfc4493_cmac_vectors() {
    let key: [u8; 16] = unhex("2b7e151628aed2a6abf7158809cf4f3c")
        .try_into()
        .unwrap();
    let m = unhex(concat!(
        "6bc1bee22e409f96e93d7e117393172a",
        "ae2d8a571e03ac9c9eb76fac45af8e51",
        "30c81c46a35ce411e5fbc1191a0a52ef",
        "f69f2445df4f9b17ad2b417be66c3710"
    ));
    assert_eq!(
        hex::encode(aes_cmac(&key, &[])),
        "bb1d6929e95937287fa37d129b756746"
    );
    assert_eq!(
        hex::encode(aes_cmac(&key, &m[..16])),
        "070a16b46b4d4144f79bdd9dd04a287c"
    );
    assert_eq!(
        hex::encode(aes_cmac(&key, &m[..40])),
        "dfa66747de9ae63030ca32611497c827"
    );
    assert_eq!(
        hex::encode(aes_cmac(&key, &m)),
        "51f0bebf7e3b9d92fc49741779363cfe"
    );
}

fn sample_msg(msg_id: u64, flags: u32, cmd: u16, body: usize) -> Vec<u8> {
    let mut m = vec![0u8; 64 + body];
    m[..4].copy_from_slice(b"\xfeSMB");
    m[4] = 64;
    m[12..14].copy_from_slice(&cmd.to_le_bytes());
    m[16..20].copy_from_slice(&flags.to_le_bytes());
    m[24..32].copy_from_slice(&msg_id.to_le_bytes());
    for (i, b) in m[64..].iter_mut().enumerate() {
        *b = i as u8;
    }
    m
}

#[test]
fn hmac_and_gmac_sign_verify() {
    for alg in [
        SigningAlgorithm::HmacSha256,
        SigningAlgorithm::AesCmac,
        SigningAlgorithm::AesGmac,
    ] {
        let s = Signer::new(alg, &[7; 16]);
        assert_eq!(s.algorithm(), alg);
        assert_eq!(SigningAlgorithm::from_wire(alg.to_wire()), Some(alg));
        let mut m = sample_msg(5, 1, 8, 100);
        s.sign(&mut m);
        assert_ne!(m[16] & 0x8, 0, "SIGNED flag set");
        assert!(s.verify(&m));
        // In place: the message is as it was afterwards, verified or not.
        let mut c = m.clone();
        assert!(s.verify_in_place(&mut c));
        assert_eq!(c, m);
        let mut t = m.clone();
        t[70] ^= 1;
        assert!(!s.verify(&t));
        let mut c = t.clone();
        assert!(!s.verify_in_place(&mut c));
        assert_eq!(c, t);
        let mut t = m.clone();
        t[50] ^= 1; // the signature itself
        assert!(!s.verify(&t));
        assert!(!s.verify_in_place(&mut t));
        assert!(!s.verify(&m[..63]));
        assert!(!s.verify_in_place(&mut m.clone()[..63]));
    }
    assert_eq!(SigningAlgorithm::from_wire(3), None);
}

#[test]
fn gmac_nonce_binds_message_id_direction_and_cancel() {
    let s = Signer::new(SigningAlgorithm::AesGmac, &[9; 16]);
    let base = s.signature(&sample_msg(1, 0, 8, 10));
    // MessageId is in the signed bytes too, so also compare against a message that differs
    // only in flags bits not otherwise relevant: flip the response flag.
    assert_ne!(base, s.signature(&sample_msg(2, 0, 8, 10)));
    assert_ne!(base, s.signature(&sample_msg(1, 1, 8, 10)));
    assert_ne!(
        s.signature(&sample_msg(1, 0, 0x0c, 10)),
        s.signature(&sample_msg(1, 0, 0x0b, 10))
    );
    // GMAC = AES-GCM tag with empty plaintext, AAD = message, nonce = MessageId || role bits.
    let m = sample_msg(0x1122334455667788, 1, 0x0c, 10);
    let g = Sealer::new(CipherId::Aes128Gcm, &[9; 16]).unwrap();
    let mut nonce = 0x1122334455667788u64.to_le_bytes().to_vec();
    nonce.extend_from_slice(&3u32.to_le_bytes());
    assert_eq!(
        g.encrypt_in_place(&nonce, &m, &mut []).unwrap(),
        s.signature(&m)
    );
}

#[test]
fn gcm_spec_vectors() {
    // McGrew & Viega, GCM specification, test cases 1 and 2 (zero key and IV).
    let s = Sealer::new(CipherId::Aes128Gcm, &[0; 16]).unwrap();
    assert_eq!(
        hex::encode(s.encrypt_in_place(&[0; 12], &[], &mut []).unwrap()),
        "58e2fccefa7e3061367f1d57a4e7455a"
    );
    let mut d = [0u8; 16];
    let tag = s.encrypt_in_place(&[0; 12], &[], &mut d).unwrap();
    assert_eq!(hex::encode(d), "0388dace60b6a392f328c2b971b2fe78");
    assert_eq!(hex::encode(tag), "ab6e47d42cec13bdf53a67b21257bddf");
    s.decrypt_in_place(&[0; 12], &[], &mut d, &tag).unwrap();
    assert_eq!(d, [0; 16]);
}

#[test]
fn aead_roundtrip_and_tamper_all_ciphers() {
    for c in [
        CipherId::Aes128Ccm,
        CipherId::Aes128Gcm,
        CipherId::Aes256Ccm,
        CipherId::Aes256Gcm,
    ] {
        assert_eq!(CipherId::from_wire(c.to_wire()), Some(c));
        let key = vec![0x42; c.key_len()];
        let s = Sealer::new(c, &key).unwrap();
        let nonce = vec![3u8; c.nonce_len()];
        let plain: Vec<u8> = (0..1000u32).map(|i| i as u8).collect();
        let mut data = plain.clone();
        let tag = s.encrypt_in_place(&nonce, b"aad", &mut data).unwrap();
        assert_ne!(data, plain);
        let mut ok = data.clone();
        s.decrypt_in_place(&nonce, b"aad", &mut ok, &tag).unwrap();
        assert_eq!(ok, plain);
        let mut bad = data.clone();
        bad[500] ^= 1;
        assert_eq!(
            s.decrypt_in_place(&nonce, b"aad", &mut bad, &tag),
            Err(CryptoError::AuthenticationFailed)
        );
        let mut bad = data.clone();
        assert!(s.decrypt_in_place(&nonce, b"aaD", &mut bad, &tag).is_err());
        let mut bad_tag = tag;
        bad_tag[0] ^= 1;
        let mut bad = data.clone();
        assert!(s
            .decrypt_in_place(&nonce, b"aad", &mut bad, &bad_tag)
            .is_err());
        assert_eq!(
            s.encrypt_in_place(&[0; 16], b"", &mut []),
            Err(CryptoError::BadNonceLength)
        );
        assert_eq!(
            Sealer::new(c, &[0; 24]).err(),
            Some(CryptoError::BadKeyLength)
        );
    }
    assert_eq!(CipherId::from_wire(0), None);
    assert_eq!(CipherId::from_wire(5), None);
}

// "Encryption in SMB 3.0: a protocol perspective": a WRITE request sealed by the client.
const CCM_WRITE_PLAIN: &str = concat!(
    "FE534D4240000100000000000900400008000000000000000400000000000000",
    "FFFE0000010000001100001400E4080000000000000000000000000000000000",
    "3100700017000000000000000000000015010000390000020100000039020000",
    "00000000000000007000000000000000536D623320656E6372797074696F6E20",
    "74657374696E67"
);
const CCM_WRITE_SEALED: &str = concat!(
    "FD534D4281A286535415445DAE393921E44FA42E66E69A111892584FB5ED524A",
    "744DA3EE87000000000001001100001400E4080025C8FEE16605A437832D1CD5",
    "2DA9F4645333482A175FE5384563F45FCDAFAEF38BC62BA4D5C62897996625A4",
    "4C29BE5658DE2E6117585779E7B59FFD971278D08580D7FA899E410E910EABF5",
    "AA1DB43050B33B49182637759AC15D84BFCDF5B6B238993C0F4CF4D6012023F6",
    "C627297075D84B7803912D0A9639634453595EF3E33FFE4E7AC2AB"
);
// ...and the READ response sealed by the server.
const CCM_READ_SEALED: &str = concat!(
    "FD534D42ABD518B68C2F04D7879F482B689EB83F870000000000000011000014",
    "00E4080067000000000001001100001400E40800493D6FE2BDBEB435CF5F5469",
    "70C7BB57BF20E713C75A3D045507E0D68E5C0346659D6FFB8AC1504A786CA2BB",
    "89C9E7FE4F313E910A04180D2D0EA7DF636329E5A3285984500EF86FE9D55DA4",
    "FAB9531CFDD4C551D47F3C73124BB4590A45052B694048B991CCF5"
);
const CCM_READ_PLAIN: &str = concat!(
    "FE534D4240000100000000000800210009000000000000000500000000000000",
    "FFFE0000010000001100001400E4080000000000000000000000000000000000",
    "11005000170000000000000000000000536D623320656E6372797074696F6E20",
    "74657374696E67"
);
const CCM_SESSION_ID: u64 = 0x8e40014000011;

#[test]
fn ccm_transform_matches_windows_vector() {
    let keys = derive(
        Dialect::SMB3_0,
        &unhex("B4546771B515F766A86735532DD6C4F0"),
        None,
        None,
    );
    // Client -> server: the server decrypts with decrypt_c2s.
    let c2s = Sealer::new(CipherId::Aes128Ccm, &keys.decrypt_c2s).unwrap();
    let sealed = unhex(CCM_WRITE_SEALED);
    let hdr = transform::parse_header(&sealed).unwrap();
    assert_eq!(hdr.session_id, CCM_SESSION_ID);
    assert_eq!(hdr.original_size, 0x87);
    assert_eq!(hdr.flags, 1);
    // Sealing with the same 16-byte nonce field reproduces the captured bytes exactly.
    let ours = transform::seal(&c2s, CCM_SESSION_ID, &hdr.nonce, &unhex(CCM_WRITE_PLAIN)).unwrap();
    assert_eq!(hex::encode_upper(&ours), CCM_WRITE_SEALED);
    assert_eq!(
        transform::unseal(&c2s, &sealed).unwrap(),
        unhex(CCM_WRITE_PLAIN)
    );
    // Server -> client.
    let s2c = Sealer::new(CipherId::Aes128Ccm, &keys.encrypt_s2c).unwrap();
    assert_eq!(
        transform::unseal(&s2c, &unhex(CCM_READ_SEALED)).unwrap(),
        unhex(CCM_READ_PLAIN)
    );
    // The wrong direction's key fails.
    assert_eq!(
        transform::unseal(&c2s, &unhex(CCM_READ_SEALED)),
        Err(CryptoError::AuthenticationFailed)
    );
}

#[test]
fn transform_roundtrip_and_rejections() {
    for c in [
        CipherId::Aes128Ccm,
        CipherId::Aes128Gcm,
        CipherId::Aes256Ccm,
        CipherId::Aes256Gcm,
    ] {
        let s = Sealer::new(c, &vec![5u8; c.key_len()]).unwrap();
        let src = NonceSource::new(c);
        let msg = sample_msg(9, 0, 8, 300);
        let n = src.next().unwrap();
        assert!(n[c.nonce_len()..].iter().all(|&b| b == 0));
        let sealed = transform::seal(&s, 77, &n[..c.nonce_len()], &msg).unwrap();
        assert_eq!(sealed.len(), msg.len() + TRANSFORM_HEADER_LEN);
        assert_eq!(&sealed[20..36], &n[..]);
        assert_eq!(transform::unseal(&s, &sealed).unwrap(), msg);
        let mut inplace = sealed.clone();
        assert_eq!(
            transform::unseal_in_place(&s, &mut inplace).unwrap(),
            &msg[..]
        );
        // Into a buffer of the plaintext's length that holds stale bytes: all replaced.
        let mut out = vec![0xAA; msg.len()];
        transform::unseal_to(&s, &sealed, &mut out).unwrap();
        assert_eq!(out, msg);
        // Any other length is refused, whatever the tag says.
        let mut short = vec![0; msg.len() - 1];
        assert!(transform::unseal_to(&s, &sealed, &mut short).is_err());

        // wrong OriginalMessageSize
        let mut bad = sealed.clone();
        bad[36] = bad[36].wrapping_add(1);
        assert!(matches!(
            transform::unseal(&s, &bad),
            Err(CryptoError::Malformed(_))
        ));
        // truncated ciphertext
        assert!(transform::unseal(&s, &sealed[..sealed.len() - 1]).is_err());
        // bad tag
        let mut bad = sealed.clone();
        bad[4] ^= 1;
        assert_eq!(
            transform::unseal(&s, &bad),
            Err(CryptoError::AuthenticationFailed)
        );
        // AAD covers the session id
        let mut bad = sealed.clone();
        bad[44] ^= 1;
        assert_eq!(
            transform::unseal(&s, &bad),
            Err(CryptoError::AuthenticationFailed)
        );
        // ciphertext bit flip
        let mut bad = sealed.clone();
        bad[100] ^= 1;
        assert_eq!(
            transform::unseal(&s, &bad),
            Err(CryptoError::AuthenticationFailed)
        );
        // wrong protocol id / flags / short
        let mut bad = sealed.clone();
        bad[0] = 0xfe;
        assert!(transform::unseal(&s, &bad).is_err());
        let mut bad = sealed.clone();
        bad[42] = 2;
        assert!(transform::unseal(&s, &bad).is_err());
        assert!(transform::parse_header(&sealed[..51]).is_err());
        // wrong nonce length
        assert_eq!(
            transform::seal(&s, 1, &[0; 13], &msg).err(),
            Some(CryptoError::BadNonceLength)
        );
    }
}

#[test]
fn nonce_source_never_repeats() {
    let src = NonceSource::new(CipherId::Aes128Gcm);
    let mut seen = std::collections::HashSet::new();
    for _ in 0..10_000 {
        assert!(seen.insert(src.next().unwrap()));
    }
    assert_eq!(src.nonce_len(), 12);
    assert_eq!(NonceSource::new(CipherId::Aes256Ccm).nonce_len(), 11);
}

mod props {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn unseal_random_never_panics(data in proptest::collection::vec(any::<u8>(), 0..200), fix in any::<bool>()) {
            let mut data = data;
            if fix && data.len() >= 52 {
                data[..4].copy_from_slice(&[0xfd, b'S', b'M', b'B']);
                let n = (data.len() - 52) as u32;
                data[36..40].copy_from_slice(&n.to_le_bytes());
                data[42] = 1; data[43] = 0;
            }
            let s = Sealer::new(CipherId::Aes128Gcm, &[1; 16]).unwrap();
            let _ = transform::parse_header(&data);
            prop_assert!(transform::unseal(&s, &data).is_err());
            let c = Sealer::new(CipherId::Aes128Ccm, &[1; 16]).unwrap();
            prop_assert!(transform::unseal(&c, &data).is_err());
        }

        #[test]
        fn signer_random_never_panics(data in proptest::collection::vec(any::<u8>(), 0..200)) {
            for alg in [SigningAlgorithm::HmacSha256, SigningAlgorithm::AesCmac, SigningAlgorithm::AesGmac] {
                let s = Signer::new(alg, &[1; 16]);
                let _ = s.verify(&data);
                let mut d = data.clone();
                s.sign(&mut d);
                prop_assert_eq!(s.verify(&d), data.len() >= 64);
            }
        }
    }
}

/// Message lengths around every boundary the sealing and signing paths see: the AES
/// block, the multi-block strides of aws-lc's GCM kernels (6, 8 and 16 blocks), and the
/// READ/WRITE sizes (64 KiB, 512 KiB, 1 MiB) with and without their headers.
fn boundary_lengths(max: usize) -> Vec<usize> {
    let mut v = vec![64, 65, 79, 80, 81, 160, 161, 255, 256, 257, 511, 512, 513];
    for io in [64 << 10, 512 << 10, 1 << 20] {
        for len in [io - 1, io, io + 1, io + 64 + 16, io + 64 + 17] {
            v.push(len);
        }
    }
    v.retain(|&l| l <= max);
    v
}

#[test]
fn sealing_at_buffer_boundaries_round_trips_in_every_form() {
    for c in [
        CipherId::Aes128Gcm,
        CipherId::Aes256Gcm,
        CipherId::Aes128Ccm,
        CipherId::Aes256Ccm,
    ] {
        let max = if c.is_gcm() { 2 << 20 } else { 70 << 10 };
        let s = Sealer::new(c, &vec![3u8; c.key_len()]).unwrap();
        let src = NonceSource::new(c);
        for len in boundary_lengths(max) {
            let msg = sample_msg(len as u64, 0, 8, len - 64);
            let n = src.next().unwrap();
            let copied = transform::seal(&s, 5, &n[..c.nonce_len()], &msg).unwrap();
            // Sealed where it lies, behind room for the header: the same bytes.
            let mut in_place = vec![0u8; TRANSFORM_HEADER_LEN];
            in_place.extend_from_slice(&msg);
            transform::seal_in_place(&s, 5, &n[..c.nonce_len()], &mut in_place).unwrap();
            assert_eq!(in_place, copied, "{c:?} {len}");
            let mut out = vec![0x55; len];
            transform::unseal_to(&s, &copied, &mut out).unwrap();
            assert!(out == msg, "{c:?} {len}: unseal_to");
            let mut b = copied.clone();
            let plain = transform::unseal_in_place(&s, &mut b).unwrap();
            assert!(plain == &msg[..], "{c:?} {len}: unseal_in_place");
            // The last byte and the first byte after the header are covered by the tag.
            for at in [TRANSFORM_HEADER_LEN, copied.len() - 1] {
                let mut bad = copied.clone();
                bad[at] ^= 0x80;
                assert_eq!(
                    transform::unseal_to(&s, &bad, &mut out),
                    Err(CryptoError::AuthenticationFailed),
                    "{c:?} {len} byte {at}"
                );
            }
            // A frame cut short or grown by one byte no longer matches its size field.
            assert!(transform::unseal(&s, &copied[..copied.len() - 1]).is_err());
            let mut long = copied.clone();
            long.push(0);
            assert!(transform::unseal(&s, &long).is_err());
        }
    }
}

#[test]
fn signing_at_buffer_boundaries_verifies_in_place_and_catches_the_last_byte() {
    for alg in [SigningAlgorithm::AesGmac, SigningAlgorithm::AesCmac] {
        let s = Signer::new(alg, &[6; 16]);
        for len in boundary_lengths(2 << 20) {
            let mut m = sample_msg(len as u64, 1, 8, len - 64);
            s.sign(&mut m);
            assert!(s.verify(&m), "{alg:?} {len}");
            let before = m.clone();
            assert!(s.verify_in_place(&mut m), "{alg:?} {len}");
            assert!(m == before, "{alg:?} {len}: message changed by the check");
            let last = m.len() - 1;
            m[last] ^= 1;
            assert!(!s.verify_in_place(&mut m), "{alg:?} {len}: last byte");
            assert!(!s.verify(&m));
        }
    }
}
