//! The RPC interfaces and pipe endpoints this crate serves, and well-known syntax UUIDs.

/// Builds the on-the-wire (little-endian NDR) form of a UUID from its textual fields.
pub(crate) const fn uuid(d1: u32, d2: u16, d3: u16, d4: [u8; 8]) -> [u8; 16] {
    let a = d1.to_le_bytes();
    let b = d2.to_le_bytes();
    let c = d3.to_le_bytes();
    [
        a[0], a[1], a[2], a[3], b[0], b[1], c[0], c[1], d4[0], d4[1], d4[2], d4[3], d4[4], d4[5],
        d4[6], d4[7],
    ]
}

/// NDR 2.0 transfer syntax 8a885d04-1ceb-11c9-9fe8-08002b104860, version 2.
pub(crate) const NDR_UUID: [u8; 16] = uuid(
    0x8a88_5d04,
    0x1ceb,
    0x11c9,
    [0x9f, 0xe8, 0x08, 0x00, 0x2b, 0x10, 0x48, 0x60],
);
/// Version of the NDR 2.0 transfer syntax.
pub(crate) const NDR_VERSION: u32 = 2;

/// First 8 wire bytes of the bind time feature negotiation syntax
/// 6cb71c2c-9812-4540-xxxx-000000000000 ([MS-RPCE] 3.3.1.5.3); byte 8 holds the flags.
pub(crate) const BTFN_PREFIX: [u8; 8] = [0x2c, 0x1c, 0xb7, 0x6c, 0x12, 0x98, 0x40, 0x45];

/// An RPC interface served on a pipe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Interface {
    /// Server service, [MS-SRVS].
    Srvsvc,
    /// Workstation service, [MS-WKST].
    Wkssvc,
    /// Local security authority, [MS-LSAD]; binds only.
    Lsarpc,
}

impl Interface {
    /// Abstract syntax UUID (wire form).
    pub(crate) fn uuid(self) -> [u8; 16] {
        match self {
            Interface::Srvsvc => uuid(
                0x4b32_4fc8,
                0x1670,
                0x01d3,
                [0x12, 0x78, 0x5a, 0x47, 0xbf, 0x6e, 0xe1, 0x88],
            ),
            Interface::Wkssvc => uuid(
                0x6bff_d098,
                0xa112,
                0x3610,
                [0x98, 0x33, 0x46, 0xc3, 0xf8, 0x7e, 0x34, 0x5a],
            ),
            Interface::Lsarpc => uuid(
                0x1234_5778,
                0x1234,
                0xabcd,
                [0xef, 0x00, 0x01, 0x23, 0x45, 0x67, 0x89, 0xab],
            ),
        }
    }

    /// (major, minor) interface version.
    pub(crate) fn version(self) -> (u16, u16) {
        match self {
            Interface::Srvsvc => (3, 0),
            Interface::Wkssvc => (1, 0),
            Interface::Lsarpc => (0, 0),
        }
    }

    /// The pipe name (without `\PIPE\`).
    pub(crate) fn pipe_name(self) -> &'static str {
        match self {
            Interface::Srvsvc => "srvsvc",
            Interface::Wkssvc => "wkssvc",
            Interface::Lsarpc => "lsarpc",
        }
    }

    /// The interface served on the named pipe `name`.
    pub(crate) fn for_pipe(name: &str) -> Option<Interface> {
        let mut n = name.trim_start_matches(['\\', '/']);
        if let Some(prefix) = n.get(..5) {
            if prefix.eq_ignore_ascii_case("pipe\\") {
                n = n.get(5..).unwrap_or_default();
            }
        }
        [Interface::Srvsvc, Interface::Wkssvc, Interface::Lsarpc]
            .into_iter()
            .find(|i| n.eq_ignore_ascii_case(i.pipe_name()))
    }
}

/// True for the pipe names served here: `srvsvc`, `wkssvc`, `lsarpc`, case-insensitive,
/// optionally prefixed by `\PIPE\`.
pub fn is_known_pipe(name: &str) -> bool {
    Interface::for_pipe(name).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pipe_names() {
        assert!(is_known_pipe("srvsvc"));
        assert!(is_known_pipe("SRVSVC"));
        assert!(is_known_pipe("\\PIPE\\srvsvc"));
        assert!(is_known_pipe("\\pipe\\WksSvc"));
        assert!(is_known_pipe("lsarpc"));
        assert!(!is_known_pipe("samr"));
        assert!(!is_known_pipe("\\PIPE\\"));
        assert!(!is_known_pipe("srvsvc2"));
        assert!(!is_known_pipe(""));
    }

    #[test]
    fn uuid_wire_form() {
        assert_eq!(
            NDR_UUID,
            [
                0x04, 0x5d, 0x88, 0x8a, 0xeb, 0x1c, 0xc9, 0x11, 0x9f, 0xe8, 0x08, 0x00, 0x2b, 0x10,
                0x48, 0x60
            ]
        );
    }
}
