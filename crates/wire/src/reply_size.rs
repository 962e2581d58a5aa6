//! How many bytes of response payload a request may ask for, read from its
//! fixed part before it is decoded: the server charges that much against a
//! connection's output budget before it runs the request, so a client that
//! stops reading its socket cannot make the server queue unbounded responses.

use crate::{Command, HEADER_SIZE};

/// Largest response payload `msg` (one request, starting at its SMB2 header)
/// may ask for: READ's Length, QUERY_DIRECTORY's and QUERY_INFO's
/// OutputBufferLength, IOCTL's MaxInputResponse + MaxOutputResponse; 0 for
/// every other command and for a request too short to hold the field (its
/// decoder refuses it later).
pub fn requested_reply_bytes(cmd: Command, msg: &[u8]) -> u64 {
    // Offsets within the request body (after the 64-byte header).
    let at = |off: usize| -> u64 {
        msg.get(HEADER_SIZE + off..HEADER_SIZE + off + 4)
            .map_or(0, |b| {
                u64::from(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            })
    };
    match cmd {
        // StructureSize, Padding, Flags, Length.
        Command::Read => at(4),
        // StructureSize, InfoType, FileInfoClass, OutputBufferLength.
        Command::QueryInfo => at(4),
        // StructureSize, FileInformationClass, Flags, FileIndex, FileId,
        // FileNameOffset, FileNameLength, OutputBufferLength.
        Command::QueryDirectory => at(28),
        // StructureSize, Reserved, CtlCode, FileId, InputOffset, InputCount,
        // MaxInputResponse, OutputOffset, OutputCount, MaxOutputResponse.
        Command::Ioctl => at(32) + at(44),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Header, Writer};

    fn request(cmd: Command, body: &[u8]) -> Vec<u8> {
        let mut w = Writer::new();
        Header {
            command: cmd as u16,
            ..Default::default()
        }
        .encode(&mut w);
        w.bytes(body);
        w.into_vec()
    }

    #[test]
    fn reads_each_commands_length_field() {
        let mut read = vec![0u8; 48];
        read[4..8].copy_from_slice(&(1u32 << 20).to_le_bytes());
        assert_eq!(
            requested_reply_bytes(Command::Read, &request(Command::Read, &read)),
            1 << 20
        );
        let mut qi = vec![0u8; 40];
        qi[4..8].copy_from_slice(&4096u32.to_le_bytes());
        assert_eq!(
            requested_reply_bytes(Command::QueryInfo, &request(Command::QueryInfo, &qi)),
            4096
        );
        let mut qd = vec![0u8; 32];
        qd[28..32].copy_from_slice(&65536u32.to_le_bytes());
        assert_eq!(
            requested_reply_bytes(
                Command::QueryDirectory,
                &request(Command::QueryDirectory, &qd)
            ),
            65536
        );
        let mut io = vec![0u8; 56];
        io[32..36].copy_from_slice(&7u32.to_le_bytes());
        io[44..48].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(
            requested_reply_bytes(Command::Ioctl, &request(Command::Ioctl, &io)),
            u64::from(u32::MAX) + 7
        );
    }

    #[test]
    fn short_requests_and_other_commands_ask_for_nothing() {
        assert_eq!(
            requested_reply_bytes(Command::Read, &request(Command::Read, &[0; 6])),
            0
        );
        assert_eq!(requested_reply_bytes(Command::Read, &[]), 0);
        assert_eq!(
            requested_reply_bytes(Command::Write, &request(Command::Write, &[0xff; 64])),
            0
        );
    }
}
