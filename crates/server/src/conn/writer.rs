//! The writer task: owns the sending side of the transport. Over Direct TCP it frames
//! messages and batches whatever is queued before flushing; over SMB Direct it hands
//! each message to the link (as Send with Invalidate when asked).

use std::sync::Arc;

use smbx_transport::DirectLink;
use smbx_wire::framing::encode_frame_header;
use tokio::io::{AsyncWrite, AsyncWriteExt, BufWriter};
use tokio::sync::{mpsc, OwnedSemaphorePermit};

/// A message to send, with the in-flight budget it holds until written and, over SMB
/// Direct, the client STag to invalidate with it.
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

/// Sends queued messages over an SMB Direct link until the channel closes or the
/// link fails.
pub(crate) async fn run_direct(link: Arc<dyn DirectLink>, mut rx: mpsc::Receiver<Outgoing>) {
    while let Some((msg, _permit, invalidate)) = rx.recv().await {
        if let Err(e) = link.send(&msg, invalidate).await {
            tracing::debug!(error = %e, "smb direct send failed");
            return;
        }
    }
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
