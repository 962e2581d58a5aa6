//! The `/metrics` HTTP endpoint: a minimal HTTP/1.1 responder. One request per
//! connection (`Connection: close`); the request head is bounded in size and
//! time, and so is writing the answer; only `GET` and `HEAD` of `/metrics` are
//! served (404 for other paths, 405 for other methods, 400 for anything that is
//! not an HTTP/1.x request line, 431 for a head that does not fit).

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;

use crate::state::ServerState;

/// Largest request head read (request line and headers).
pub const MAX_HEAD: usize = 8 * 1024;
/// Time a client has to send its request head.
pub const READ_TIMEOUT: Duration = Duration::from_secs(5);
/// Time a client has to take the answer.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// Scrapes served at once; further connections are closed at once.
pub const MAX_SCRAPES: usize = 8;

/// The running endpoint; it stops when this is dropped.
pub struct Endpoint {
    addr: SocketAddr,
    task: JoinHandle<()>,
}

impl Endpoint {
    /// Binds `metrics listen` when it is set and serves `/metrics` for `state`
    /// (`None` when the option is off: no port is bound).
    pub async fn start(state: &Arc<ServerState>) -> io::Result<Option<Endpoint>> {
        let Some(addr) = state.config().global.metrics_listen else {
            return Ok(None);
        };
        Self::bind(state.clone(), addr).await.map(Some)
    }

    /// Binds `addr` and serves `/metrics` for `state`.
    pub async fn bind(state: Arc<ServerState>, addr: SocketAddr) -> io::Result<Endpoint> {
        let l = TcpListener::bind(addr).await.map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot listen for metrics (metrics listen = {addr}): {e}"),
            )
        })?;
        let addr = l.local_addr()?;
        state.metrics.set_endpoint(addr);
        tracing::info!(%addr, "serving Prometheus metrics at http://{addr}/metrics");
        let task = tokio::spawn(accept_loop(l, state));
        Ok(Endpoint { addr, task })
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn accept_loop(l: TcpListener, state: Arc<ServerState>) {
    let slots = Arc::new(Semaphore::new(MAX_SCRAPES));
    loop {
        let (stream, peer) = match l.accept().await {
            Ok(x) => x,
            Err(e) => {
                tracing::debug!(error = %e, "metrics accept failed");
                // Out of descriptors and the like: do not spin.
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            tracing::debug!(%peer, "too many metrics scrapes at once; closing");
            continue;
        };
        let state = state.clone();
        tokio::spawn(async move {
            if let Err(e) = serve(stream, &state).await {
                tracing::debug!(%peer, error = %e, "metrics request failed");
            }
            drop(slot);
        });
    }
}

/// What a request asked for.
#[derive(Debug, PartialEq, Eq)]
pub enum Route {
    /// `GET /metrics` (or `HEAD`: the same head, no body).
    Metrics {
        /// `HEAD`: headers only.
        head_only: bool,
    },
    /// A path other than `/metrics`.
    NotFound,
    /// A method other than GET or HEAD.
    MethodNotAllowed,
    /// Not an HTTP/1.x request line.
    BadRequest,
}

/// Reads one request head and answers it.
async fn serve(mut s: TcpStream, state: &ServerState) -> io::Result<()> {
    let route = match tokio::time::timeout(READ_TIMEOUT, read_head(&mut s)).await {
        Err(_) => return Err(io::Error::new(io::ErrorKind::TimedOut, "request head")),
        Ok(Err(e)) => return Err(e),
        Ok(Ok(None)) => {
            return write_answer(&mut s, "431 Request Header Fields Too Large", "", false).await
        }
        Ok(Ok(Some(head))) => route(&head),
    };
    match route {
        Route::Metrics { head_only } => {
            let body = super::render(state);
            write_answer(&mut s, "200 OK", &body, head_only).await
        }
        Route::NotFound => {
            write_answer(&mut s, "404 Not Found", "not found: try /metrics\n", false).await
        }
        Route::MethodNotAllowed => {
            write_answer(
                &mut s,
                "405 Method Not Allowed",
                "only GET and HEAD\n",
                false,
            )
            .await
        }
        Route::BadRequest => write_answer(&mut s, "400 Bad Request", "bad request\n", false).await,
    }
}

/// Reads until the blank line ending the head: `Some(head)`, or `None` when
/// [`MAX_HEAD`] bytes came without one. A peer that closes first is an error.
async fn read_head(s: &mut TcpStream) -> io::Result<Option<Vec<u8>>> {
    let mut buf = vec![0u8; MAX_HEAD];
    let mut len = 0;
    loop {
        let Some(room) = buf.get_mut(len..) else {
            return Ok(None);
        };
        if room.is_empty() {
            return Ok(None);
        }
        let n = s.read(room).await?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "closed before the end of the request head",
            ));
        }
        len += n;
        let got = buf.get(..len).unwrap_or_default();
        if let Some(end) = head_end(got) {
            buf.truncate(end);
            return Ok(Some(buf));
        }
    }
}

/// Where the head ends (after its blank line, `\r\n\r\n` or bare `\n\n`).
fn head_end(b: &[u8]) -> Option<usize> {
    let crlf = b.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4);
    let lf = b.windows(2).position(|w| w == b"\n\n").map(|i| i + 2);
    match (crlf, lf) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Routes a request head by its request line.
pub fn route(head: &[u8]) -> Route {
    let line_end = head.iter().position(|&c| c == b'\n').unwrap_or(head.len());
    let Some(line) = head.get(..line_end) else {
        return Route::BadRequest;
    };
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let Ok(line) = std::str::from_utf8(line) else {
        return Route::BadRequest;
    };
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Route::BadRequest;
    };
    if !matches!(version, "HTTP/1.1" | "HTTP/1.0")
        || method.is_empty()
        || !method.bytes().all(|c| c.is_ascii_uppercase())
        || !target.starts_with('/')
    {
        return Route::BadRequest;
    }
    let path = target.split(['?', '#']).next().unwrap_or(target);
    match method {
        "GET" | "HEAD" if path == "/metrics" => Route::Metrics {
            head_only: method == "HEAD",
        },
        "GET" | "HEAD" => Route::NotFound,
        _ => Route::MethodNotAllowed,
    }
}

async fn write_answer(
    s: &mut TcpStream,
    status: &str,
    body: &str,
    head_only: bool,
) -> io::Result<()> {
    let content_type = if status.starts_with("200") {
        super::exposition::CONTENT_TYPE
    } else {
        "text/plain; charset=utf-8"
    };
    let allow = if status.starts_with("405") {
        "Allow: GET, HEAD\r\n"
    } else {
        ""
    };
    let mut msg = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n{allow}Connection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    if !head_only {
        msg.extend_from_slice(body.as_bytes());
    }
    tokio::time::timeout(WRITE_TIMEOUT, async {
        s.write_all(&msg).await?;
        s.shutdown().await
    })
    .await
    .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "writing the answer"))?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes() {
        let m = Route::Metrics { head_only: false };
        assert_eq!(route(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"), m);
        assert_eq!(route(b"GET /metrics?x=1 HTTP/1.0\n\n"), m);
        assert_eq!(
            route(b"HEAD /metrics HTTP/1.1\r\n\r\n"),
            Route::Metrics { head_only: true }
        );
        assert_eq!(route(b"GET / HTTP/1.1\r\n\r\n"), Route::NotFound);
        assert_eq!(route(b"GET /metricsx HTTP/1.1\r\n\r\n"), Route::NotFound);
        assert_eq!(
            route(b"POST /metrics HTTP/1.1\r\n\r\n"),
            Route::MethodNotAllowed
        );
        for bad in [
            &b""[..],
            b"\r\n\r\n",
            b"GET /metrics\r\n\r\n",
            b"GET /metrics HTTP/2\r\n\r\n",
            b"GET  /metrics HTTP/1.1\r\n\r\n",
            b"get /metrics HTTP/1.1\r\n\r\n",
            b"GET metrics HTTP/1.1\r\n\r\n",
            b"GET /metrics HTTP/1.1 x\r\n\r\n",
            b"\xff\xfe /metrics HTTP/1.1\r\n\r\n",
        ] {
            assert_eq!(route(bad), Route::BadRequest, "{bad:?}");
        }
    }

    #[test]
    fn head_ends() {
        assert_eq!(head_end(b"GET / HTTP/1.1\r\n\r\nrest"), Some(18));
        assert_eq!(head_end(b"GET / HTTP/1.1\n\n"), Some(16));
        assert_eq!(head_end(b"GET / HTTP/1.1\r\nHost: a\r\n"), None);
    }
}
