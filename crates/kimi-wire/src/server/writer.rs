//! The one task that writes to stdout.
//!
//! Everyone else holds a `Sender<String>` of finished lines; the queue is bounded so a client that stops
//! reading slows the agent down instead of growing our memory. Lines are batched: the writer flushes only
//! when the queue is momentarily empty, so a burst of events costs one syscall, and a lone event is still
//! flushed at once.

use tokio::io::{AsyncWrite, AsyncWriteExt, BufWriter};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Lines queued for stdout before senders wait: enough to absorb a burst of streamed parts, small enough
/// (a few MB of typical events) to bound memory when the client is not reading.
pub const OUTBOX_CAPACITY: usize = 1024;

/// Writes lines until `closing` fires and the queue is drained, or every sender is gone.
/// A write error (the client closed stdout) fires `lost` and keeps draining so senders never block.
pub async fn run<W: AsyncWrite + Unpin>(
    mut rx: mpsc::Receiver<String>,
    output: W,
    closing: CancellationToken,
    lost: CancellationToken,
) {
    let mut out = BufWriter::with_capacity(64 * 1024, output);
    let mut broken = false;
    loop {
        let line = tokio::select! {
            biased;
            line = rx.recv() => line,
            () = closing.cancelled() => {
                // No new lines after this; what is queued still goes out.
                rx.close();
                rx.recv().await
            }
        };
        let Some(line) = line else { break };
        if broken {
            continue;
        }
        let mut result = write_line(&mut out, &line).await;
        while result.is_ok() {
            match rx.try_recv() {
                Ok(next) => result = write_line(&mut out, &next).await,
                Err(_) => break,
            }
        }
        if result.is_ok() {
            result = out.flush().await;
        }
        if let Err(e) = result {
            tracing::warn!(error = %e, "stdout closed; dropping further output");
            broken = true;
            lost.cancel();
        }
    }
    let _ = out.flush().await;
}

async fn write_line<W: AsyncWrite + Unpin>(out: &mut BufWriter<W>, line: &str) -> std::io::Result<()> {
    out.write_all(line.as_bytes()).await?;
    out.write_all(b"\n").await
}
