//! The control protocol: one JSON request line from the client, one JSON response
//! line from the server, then the server closes the connection. Requests are
//! bounded ([`MAX_REQUEST`], [`REQUEST_TIMEOUT`]): a local client is still input.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};

use super::reload::ReloadReport;
use super::status::Status;

/// Longest request line accepted, newline included.
pub const MAX_REQUEST: usize = 4096;
/// How long the server waits for a whole request line.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest response the client reads (a status of a very busy server stays far below).
pub const MAX_RESPONSE: u64 = 256 << 20;

/// What a client asks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "command", rename_all = "snake_case")]
pub enum Request {
    /// Sessions, trees, opens, locks and totals ([`Status`]).
    Status,
    /// Re-read smb.conf and the password database ([`ReloadReport`]).
    Reload,
}

/// The server's answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum Response {
    /// The answer to [`Request::Status`].
    Status(Box<Status>),
    /// The answer to [`Request::Reload`] when the new configuration is in force.
    Reloaded(ReloadReport),
    /// The request failed; the message says why (for a refused reload: the file
    /// and line, and that the old configuration stays).
    Error {
        /// What went wrong.
        message: String,
    },
}

/// Reads one request line of at most [`MAX_REQUEST`] bytes within [`REQUEST_TIMEOUT`].
pub async fn read_request<R: AsyncRead + Unpin>(r: R) -> Result<Request, String> {
    let mut line = Vec::new();
    let mut rd = BufReader::new(tokio::io::AsyncReadExt::take(r, MAX_REQUEST as u64));
    match tokio::time::timeout(REQUEST_TIMEOUT, rd.read_until(b'\n', &mut line)).await {
        Err(_) => return Err("no complete request in time".into()),
        Ok(Err(e)) => return Err(format!("cannot read the request: {e}")),
        Ok(Ok(_)) => {}
    }
    if line.last() != Some(&b'\n') {
        return Err(format!(
            "the request is not one line of at most {MAX_REQUEST} bytes"
        ));
    }
    parse_request(&line)
}

/// Parses a request line.
pub fn parse_request(line: &[u8]) -> Result<Request, String> {
    serde_json::from_slice(line).map_err(|e| format!("invalid request: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn requests_are_bounded_lines() {
        let ok = b"{\"command\":\"status\"}\n".to_vec();
        assert_eq!(read_request(&ok[..]).await, Ok(Request::Status));
        let ok = b"{\"command\":\"reload\"}\n".to_vec();
        assert_eq!(read_request(&ok[..]).await, Ok(Request::Reload));
        // No newline: refused, not waited for forever.
        assert!(read_request(&b"{\"command\":\"status\"}"[..])
            .await
            .is_err());
        // Too long: refused after MAX_REQUEST bytes.
        let mut long = vec![b' '; MAX_REQUEST * 4];
        long.push(b'\n');
        assert!(read_request(&long[..]).await.is_err());
        for bad in [
            &b"{\"command\":\"shutdown\"}\n"[..],
            b"\xff\xfe\n",
            b"[]\n",
            b"\n",
        ] {
            assert!(read_request(bad).await.is_err(), "{bad:?}");
        }
    }

    #[test]
    fn wire_form_is_stable() {
        assert_eq!(
            serde_json::to_string(&Request::Status).unwrap(),
            r#"{"command":"status"}"#
        );
        let e = Response::Error {
            message: "x".into(),
        };
        assert_eq!(
            serde_json::to_string(&e).unwrap(),
            r#"{"result":"error","message":"x"}"#
        );
    }
}
