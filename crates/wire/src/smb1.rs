//! Detection of the SMB1 multi-protocol NEGOTIATE that older clients send first
//! ([MS-SMB2] 3.3.5.3.1). Only what is needed to pick an SMB2 answer is decoded.

use crate::codec::{Reader, WireError};
use crate::header::SMB1_PROTOCOL_ID;
use crate::Dialect;

/// SMB1 command code for NEGOTIATE.
pub const SMB1_COM_NEGOTIATE: u8 = 0x72;
/// Size of the SMB1 header.
pub const SMB1_HEADER_SIZE: usize = 32;
/// Upper bound on dialect strings accepted.
const MAX_DIALECTS: usize = 64;

/// True if `msg` starts with an SMB1 header.
pub fn is_smb1(msg: &[u8]) -> bool {
    msg.get(..4) == Some(&SMB1_PROTOCOL_ID[..])
}

/// Decodes an SMB1 NEGOTIATE request and returns its dialect strings.
pub fn parse_negotiate(msg: &[u8]) -> Result<Vec<String>, WireError> {
    let mut r = Reader::new(msg);
    if r.array::<4>()? != SMB1_PROTOCOL_ID {
        return Err(WireError::Invalid("not SMB1"));
    }
    if r.u8()? != SMB1_COM_NEGOTIATE {
        return Err(WireError::Invalid("SMB1 command is not NEGOTIATE"));
    }
    r.seek(SMB1_HEADER_SIZE)?;
    let word_count = r.u8()? as usize;
    r.skip(word_count * 2)?;
    let byte_count = r.u16()? as usize;
    let mut bytes = r.bytes(byte_count)?;
    let mut out = Vec::new();
    while let Some((&fmt, rest)) = bytes.split_first() {
        if fmt != 0x02 {
            return Err(WireError::Invalid("SMB1 dialect buffer format"));
        }
        let nul = rest
            .iter()
            .position(|&b| b == 0)
            .ok_or(WireError::Invalid("unterminated SMB1 dialect"))?;
        if out.len() >= MAX_DIALECTS {
            return Err(WireError::Invalid("too many SMB1 dialects"));
        }
        out.push(String::from_utf8_lossy(&rest[..nul]).into_owned());
        bytes = &rest[nul + 1..];
    }
    Ok(out)
}

/// The SMB2 dialect revision to answer an SMB1 negotiate with: the wildcard 0x02FF
/// when "SMB 2.???" is offered and the server supports 2.1 or later, 0x0202 when
/// "SMB 2.002" is offered and allowed, otherwise `None` (SMB1 only: refuse).
pub fn smb2_answer(dialects: &[String], min: Dialect, max: Dialect) -> Option<Dialect> {
    let has = |s: &str| dialects.iter().any(|d| d == s);
    if has("SMB 2.???") && max >= Dialect::SMB2_1 {
        return Some(Dialect::WILDCARD);
    }
    if (has("SMB 2.002") || has("SMB 2.???"))
        && min <= Dialect::SMB2_0_2
        && max >= Dialect::SMB2_0_2
    {
        return Some(Dialect::SMB2_0_2);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn smb1_negotiate(dialects: &[&str]) -> Vec<u8> {
        let mut m = Vec::new();
        m.extend_from_slice(&SMB1_PROTOCOL_ID);
        m.push(SMB1_COM_NEGOTIATE);
        m.resize(SMB1_HEADER_SIZE, 0);
        m.push(0);
        let mut b = Vec::new();
        for d in dialects {
            b.push(2);
            b.extend_from_slice(d.as_bytes());
            b.push(0);
        }
        m.extend_from_slice(&(b.len() as u16).to_le_bytes());
        m.extend_from_slice(&b);
        m
    }

    #[test]
    fn picks_wildcard_or_202() {
        let m = smb1_negotiate(&["NT LM 0.12", "SMB 2.002", "SMB 2.???"]);
        assert!(is_smb1(&m));
        let d = parse_negotiate(&m).unwrap();
        assert_eq!(d.len(), 3);
        assert_eq!(
            smb2_answer(&d, Dialect::SMB2_0_2, Dialect::SMB3_1_1),
            Some(Dialect::WILDCARD)
        );
        assert_eq!(
            smb2_answer(&d, Dialect::SMB2_0_2, Dialect::SMB2_0_2),
            Some(Dialect::SMB2_0_2)
        );
        let d = parse_negotiate(&smb1_negotiate(&["NT LM 0.12", "SMB 2.002"])).unwrap();
        assert_eq!(
            smb2_answer(&d, Dialect::SMB2_0_2, Dialect::SMB3_1_1),
            Some(Dialect::SMB2_0_2)
        );
        assert_eq!(smb2_answer(&d, Dialect::SMB3_0, Dialect::SMB3_1_1), None);
        let d = parse_negotiate(&smb1_negotiate(&["NT LM 0.12"])).unwrap();
        assert_eq!(smb2_answer(&d, Dialect::SMB2_0_2, Dialect::SMB3_1_1), None);
    }

    #[test]
    fn malformed_is_error() {
        let m = smb1_negotiate(&["SMB 2.002"]);
        for n in 0..m.len() {
            assert!(parse_negotiate(&m[..n]).is_err());
        }
        let mut bad = m.clone();
        let last = bad.len() - 1;
        bad[last] = b'x';
        assert!(parse_negotiate(&bad).is_err());
    }
}
