//! The writer task: owns the socket's write half, frames messages (Direct TCP) and
//! batches whatever is queued before flushing. (Over SMB Direct, messages go straight
//! to the link: see `Connection::send_holding`.)

use smbx_wire::framing::encode_frame_header;
use tokio::io::{AsyncWrite, AsyncWriteExt, BufWriter};
use tokio::sync::{mpsc, OwnedSemaphorePermit};

/// A message to send, with the in-flight budget it holds until written (and a client
/// STag to invalidate, which only SMB Direct uses).
pub(crate) type Outgoing = (Vec<u8>, Option<OwnedSemaphorePermit>, Option<u32>);

/// Writes queued messages until the channel closes or the socket fails.
pub(crate) async fn run<W: AsyncWrite + Unpin>(wr: W, mut rx: mpsc::Receiver<Outgoing>) {
    let mut bw = BufWriter::with_capacity(256 * 1024, wr);
    while let Some((msg, _permit, _)) = rx.recv().await {
        if write_one(&mut bw, &msg).await.is_err() {
            return;
        }
        while let Ok((msg, _permit, _)) = rx.try_recv() {
            if write_one(&mut bw, &msg).await.is_err() {
                return;
            }
        }
        if bw.flush().await.is_err() {
            return;
        }
    }
    let _ = bw.shutdown().await;
}

async fn write_one<W: AsyncWrite + Unpin>(
    bw: &mut BufWriter<W>,
    msg: &[u8],
) -> std::io::Result<()> {
    let hdr = encode_frame_header(msg.len())
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    bw.write_all(&hdr).await?;
    bw.write_all(msg).await
}
