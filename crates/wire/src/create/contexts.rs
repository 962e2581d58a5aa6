//! The create contexts of a CREATE request decoded into what they ask for
//! ([MS-SMB2] 2.2.13.2): [`CreateContexts::decode`] takes the chain
//! [`super::parse_contexts`] split (every Next, name and data offset already checked
//! against the chain) and checks each known context's data length and the
//! combinations the durable contexts allow. Unknown contexts (AppInstanceId, the
//! version contexts, anything new) are ignored, as a Windows server does.

use thiserror::Error;

use super::{ctx, CreateContext};
use crate::codec::Reader;
use crate::durable::{DurableV2Reconnect, DurableV2Request};
use crate::{Dialect, FileId};

/// A durable handle request: `DHnQ` ([MS-SMB2] 2.2.13.2.3) or `DH2Q` (2.2.13.2.11,
/// decoded by [`DurableV2Request`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DurableRequest {
    /// DH2Q rather than DHnQ.
    pub v2: bool,
    /// DH2Q Timeout (ms; 0: the server's default).
    pub timeout_ms: u32,
    /// DH2Q Flags (SMB2_DHANDLE_FLAG_PERSISTENT = 2).
    pub flags: u32,
    /// DH2Q CreateGuid.
    pub create_guid: [u8; 16],
}

/// A durable handle reconnect: `DHnC` ([MS-SMB2] 2.2.13.2.4) or `DH2C` (2.2.13.2.12,
/// decoded by [`DurableV2Reconnect`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DurableReconnect {
    /// DH2C rather than DHnC.
    pub v2: bool,
    /// The FileId of the durable open.
    pub file_id: FileId,
    /// DH2C CreateGuid (zero for DHnC).
    pub create_guid: [u8; 16],
}

/// Why a create context chain is unacceptable.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ContextError {
    /// A known context's data has the wrong length.
    #[error("create context {name}: {len} bytes of data, {expected} expected")]
    BadLength {
        /// The context's name.
        name: &'static str,
        /// Its DataLength.
        len: usize,
        /// The length its structure has.
        expected: usize,
    },
    /// Two contexts that exclude each other (DHnQ with DH2Q, DH2C with any other
    /// durable context, DHnC with DH2Q).
    #[error("create contexts {0} and {1} exclude each other")]
    Conflict(&'static str, &'static str),
}

/// The create contexts a server acts on, decoded; data it decodes later (the lease
/// request, the EA list, the security descriptor) is kept as sent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CreateContexts<'a> {
    /// `MxAc`: report the maximal access.
    pub mxac: bool,
    /// `QFid`: report the on-disk id.
    pub qfid: bool,
    /// `TWrp`: open a snapshot (its 8-byte timestamp checked).
    pub twrp: bool,
    /// `AlSi`: the allocation size of a new file.
    pub alloc: Option<u64>,
    /// `ExtA`: FILE_FULL_EA_INFORMATION for a new file
    /// ([`crate::fscc::ea::decode_full_list`]).
    pub ea: Option<&'a [u8]>,
    /// `RqLs`: the lease request ([`crate::oplock::decode_lease_request`]).
    pub lease: Option<&'a [u8]>,
    /// `DHnQ` / `DH2Q`: a durable handle is requested.
    pub durable: Option<DurableRequest>,
    /// `DHnC` / `DH2C`: a durable handle is reclaimed.
    pub reconnect: Option<DurableReconnect>,
    /// `SecD`: the security descriptor of a new file
    /// ([`crate::security_descriptor::SecurityDescriptor::decode`]).
    pub sd: Option<&'a [u8]>,
}

/// The context's data as exactly `N` bytes.
fn exact<const N: usize>(name: &'static str, data: &[u8]) -> Result<[u8; N], ContextError> {
    data.try_into().map_err(|_| ContextError::BadLength {
        name,
        len: data.len(),
        expected: N,
    })
}

/// The context's data through its own decoder, whose only failure is a size other
/// than `expected`.
fn sized<T>(
    name: &'static str,
    data: &[u8],
    expected: usize,
    decode: impl FnOnce(&[u8]) -> Result<T, crate::WireError>,
) -> Result<T, ContextError> {
    decode(data).map_err(|_| ContextError::BadLength {
        name,
        len: data.len(),
        expected,
    })
}

fn file_id_of(b: &[u8]) -> FileId {
    let mut r = Reader::new(b);
    FileId::decode(&mut r).unwrap_or_default()
}

impl<'a> CreateContexts<'a> {
    /// Decodes the contexts of `list` for a connection of `dialect` (DH2Q and DH2C are
    /// SMB 3.x contexts: on 2.x they are ignored as unknown). Later contexts override
    /// earlier ones of the same name; DHnC wins over DHnQ, which it makes moot
    /// (smb2.durable-v2-open.create-blob).
    pub fn decode(
        list: &[CreateContext<'a>],
        dialect: Dialect,
    ) -> Result<CreateContexts<'a>, ContextError> {
        let mut c = CreateContexts::default();
        let v3 = dialect.is_smb3();
        let (mut dhnc, mut dh2c) = (false, false);
        for x in list {
            match x.name {
                n if n == ctx::DHNQ => {
                    exact::<16>("DHnQ", x.data)?;
                    if c.durable.is_some_and(|d| d.v2) {
                        return Err(ContextError::Conflict("DH2Q", "DHnQ"));
                    }
                    c.durable = Some(DurableRequest {
                        v2: false,
                        timeout_ms: 0,
                        flags: 0,
                        create_guid: [0; 16],
                    });
                }
                n if n == ctx::DH2Q && v3 => {
                    let q = sized(
                        "DH2Q",
                        x.data,
                        DurableV2Request::SIZE,
                        DurableV2Request::decode,
                    )?;
                    if c.durable.is_some_and(|d| !d.v2) {
                        return Err(ContextError::Conflict("DHnQ", "DH2Q"));
                    }
                    c.durable = Some(DurableRequest {
                        v2: true,
                        timeout_ms: q.timeout_ms,
                        flags: q.flags,
                        create_guid: q.create_guid,
                    });
                }
                n if n == ctx::MXAC => c.mxac = true,
                n if n == ctx::QFID => c.qfid = true,
                n if n == ctx::TWRP => {
                    exact::<8>("TWrp", x.data)?;
                    c.twrp = true;
                }
                n if n == ctx::ALSI => {
                    c.alloc = Some(u64::from_le_bytes(exact::<8>("AlSi", x.data)?));
                }
                n if n == ctx::EXTA => c.ea = Some(x.data),
                n if n == ctx::RQLS => c.lease = Some(x.data),
                n if n == ctx::DHNC => {
                    let b = exact::<16>("DHnC", x.data)?;
                    dhnc = true;
                    if c.reconnect.is_none() {
                        c.reconnect = Some(DurableReconnect {
                            v2: false,
                            file_id: file_id_of(&b),
                            create_guid: [0; 16],
                        });
                    }
                }
                n if n == ctx::DH2C && v3 => {
                    let r = sized(
                        "DH2C",
                        x.data,
                        DurableV2Reconnect::SIZE,
                        DurableV2Reconnect::decode,
                    )?;
                    dh2c = true;
                    c.reconnect = Some(DurableReconnect {
                        v2: true,
                        file_id: r.file_id,
                        create_guid: r.create_guid,
                    });
                }
                n if n == ctx::SECD => c.sd = Some(x.data),
                _ => {} // AppInstanceId, unknown: ignored.
            }
        }
        // DH2C excludes every other durable context, DHnC the version 2 ones.
        let dh2q = c.durable.is_some_and(|d| d.v2);
        if dh2c && dhnc {
            return Err(ContextError::Conflict("DH2C", "DHnC"));
        }
        if dh2c && c.durable.is_some() {
            return Err(ContextError::Conflict(
                "DH2C",
                if dh2q { "DH2Q" } else { "DHnQ" },
            ));
        }
        if dhnc && dh2q {
            return Err(ContextError::Conflict("DHnC", "DH2Q"));
        }
        if dhnc {
            c.durable = None;
        }
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::super::{encode_contexts, parse_contexts};
    use super::*;

    fn decode(chain: &[u8], d: Dialect) -> Result<CreateContexts<'_>, ContextError> {
        CreateContexts::decode(&parse_contexts(chain).unwrap(), d)
    }

    fn dh2q(timeout_ms: u32, flags: u32, guid: u8) -> Vec<u8> {
        DurableV2Request {
            timeout_ms,
            flags,
            create_guid: [guid; 16],
        }
        .encode()
    }

    #[test]
    fn known_contexts_decode() {
        let alloc = 4096u64.to_le_bytes();
        let q = dh2q(60_000, 2, 7);
        let chain = encode_contexts(&[
            (ctx::MXAC, &[]),
            (ctx::QFID, &[]),
            (ctx::ALSI, &alloc),
            (ctx::EXTA, b"ea"),
            (ctx::RQLS, b"lease"),
            (ctx::SECD, b"sd"),
            (ctx::DH2Q, &q),
            (ctx::APP_INSTANCE_ID, &[1; 20]),
            (b"Unkn", &[9; 3]),
        ]);
        let c = decode(&chain, Dialect::SMB3_1_1).unwrap();
        assert!(c.mxac && c.qfid && !c.twrp);
        assert_eq!(c.alloc, Some(4096));
        assert_eq!(c.ea, Some(&b"ea"[..]));
        assert_eq!(c.lease, Some(&b"lease"[..]));
        assert_eq!(c.sd, Some(&b"sd"[..]));
        assert_eq!(
            c.durable,
            Some(DurableRequest {
                v2: true,
                timeout_ms: 60_000,
                flags: 2,
                create_guid: [7; 16],
            })
        );
        // On 2.1 DH2Q is an unknown context.
        assert_eq!(decode(&chain, Dialect::SMB2_1).unwrap().durable, None);
    }

    #[test]
    fn reconnects_decode() {
        let mut fid = 1u64.to_le_bytes().to_vec();
        fid.extend_from_slice(&2u64.to_le_bytes());
        let chain = encode_contexts(&[(ctx::DHNC, &fid), (ctx::DHNQ, &[0; 16])]);
        let c = decode(&chain, Dialect::SMB3_0).unwrap();
        let id = FileId {
            persistent: 1,
            volatile: 2,
        };
        assert_eq!(
            c.reconnect,
            Some(DurableReconnect {
                v2: false,
                file_id: id,
                create_guid: [0; 16],
            })
        );
        // DHnC makes DHnQ moot.
        assert_eq!(c.durable, None);
        let mut v2 = fid.clone();
        v2.extend_from_slice(&[5; 16]);
        v2.extend_from_slice(&0u32.to_le_bytes());
        let chain = encode_contexts(&[(ctx::DH2C, &v2)]);
        let c = decode(&chain, Dialect::SMB3_0).unwrap();
        assert_eq!(c.reconnect.map(|r| (r.v2, r.file_id)), Some((true, id)));
        assert_eq!(c.reconnect.unwrap().create_guid, [5; 16]);
    }

    #[test]
    fn wrong_lengths_name_the_context() {
        for (name, len, expected, label) in [
            (ctx::DHNQ, 15, 16, "DHnQ"),
            (ctx::DH2Q, 33, 32, "DH2Q"),
            (ctx::TWRP, 4, 8, "TWrp"),
            (ctx::ALSI, 16, 8, "AlSi"),
            (ctx::DHNC, 8, 16, "DHnC"),
            (ctx::DH2C, 32, 36, "DH2C"),
        ] {
            let data = vec![0u8; len];
            let chain = encode_contexts(&[(name, &data)]);
            assert_eq!(
                decode(&chain, Dialect::SMB3_1_1),
                Err(ContextError::BadLength {
                    name: label,
                    len,
                    expected
                }),
                "{label}"
            );
        }
        // Empty data is a wrong length too (except where a context has none).
        assert!(decode(&encode_contexts(&[(ctx::ALSI, &[])]), Dialect::SMB3_0).is_err());
    }

    #[test]
    fn durable_combinations() {
        let q = dh2q(0, 0, 1);
        let fid = [0u8; 16];
        let c2 = [0u8; 36];
        let refused: [&[(&[u8], &[u8])]; 5] = [
            &[(ctx::DHNQ, &fid), (ctx::DH2Q, &q)],
            &[(ctx::DH2Q, &q), (ctx::DHNQ, &fid)],
            &[(ctx::DH2C, &c2), (ctx::DHNC, &fid)],
            &[(ctx::DH2C, &c2), (ctx::DH2Q, &q)],
            &[(ctx::DHNC, &fid), (ctx::DH2Q, &q)],
        ];
        for list in refused {
            let chain = encode_contexts(list);
            assert!(
                matches!(
                    decode(&chain, Dialect::SMB3_1_1),
                    Err(ContextError::Conflict(..))
                ),
                "{list:?}"
            );
        }
        // Two DH2Q: the later one counts.
        let later = dh2q(5, 0, 2);
        let chain = encode_contexts(&[(ctx::DH2Q, &q), (ctx::DH2Q, &later)]);
        let c = decode(&chain, Dialect::SMB3_0).unwrap();
        assert_eq!(c.durable.unwrap().timeout_ms, 5);
    }

    #[test]
    fn error_messages_say_what_failed() {
        let e = decode(&encode_contexts(&[(ctx::DHNQ, &[0; 4])]), Dialect::SMB3_0).unwrap_err();
        assert_eq!(
            e.to_string(),
            "create context DHnQ: 4 bytes of data, 16 expected"
        );
        assert_eq!(
            ContextError::Conflict("DH2C", "DHnC").to_string(),
            "create contexts DH2C and DHnC exclude each other"
        );
    }
}
