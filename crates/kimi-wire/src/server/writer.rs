//! The one thread that writes to stdout.
//!
//! Everyone else sends finished lines into the [`Outbox`]. The writer takes whatever is queued at once,
//! has the attached journals (the session files) write their records first, then writes the lines in one
//! `write` (group commit: a burst of events costs one system call, a lone event is still written at
//! once). It is a thread of its own doing plain blocking writes: the pipe to the client may block while
//! the client is not reading, and the agent's thread must not.

use std::io::Write;
use std::pin::Pin;
use std::sync::Arc;

use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::outbox::Outbox;

pub use super::outbox::OUTBOX_CAPACITY;

/// Bytes gathered before a write goes out in the middle of a large batch.
const WRITE_CHUNK: usize = 256 * 1024;

/// Where the server's lines go.
pub enum Output {
    /// A blocking writer, such as the process's stdout ([`Output::stdout`]).
    Blocking(Box<dyn Write + Send>),
    /// An async stream (an in-process client, tests), driven to completion by the writer thread.
    Async(Pin<Box<dyn AsyncWrite + Send>>),
}

impl Output {
    /// The process's stdout, written with blocking writes by the writer thread.
    pub fn stdout() -> Self {
        Self::Blocking(Box::new(std::io::stdout()))
    }

    fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        match self {
            Self::Blocking(out) => out.write_all(bytes).and_then(|()| out.flush()),
            Self::Async(out) => futures::executor::block_on(async {
                out.write_all(bytes).await?;
                out.flush().await
            }),
        }
    }
}

impl std::fmt::Debug for Output {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Blocking(_) => "Output::Blocking",
            Self::Async(_) => "Output::Async",
        })
    }
}

impl<W: AsyncWrite + Send + 'static> From<W> for Output {
    fn from(output: W) -> Self {
        Self::Async(Box::pin(output))
    }
}

/// Starts the writer thread; the receiver completes when the outbox is closed and drained (or the
/// thread could not start, which is logged and fires `lost`). A write error (the client closed stdout)
/// fires `lost`; the writer then keeps draining so that senders never block.
pub(crate) fn spawn(outbox: Arc<Outbox>, output: Output, lost: CancellationToken) -> oneshot::Receiver<()> {
    let (done, finished) = oneshot::channel();
    // Async outputs may be tokio types that need the runtime to make progress.
    let runtime = tokio::runtime::Handle::try_current().ok();
    let thread_lost = lost.clone();
    let started = std::thread::Builder::new()
        .name("wire-writer".into())
        .spawn(move || {
            let _entered = runtime.as_ref().map(tokio::runtime::Handle::enter);
            run(&outbox, output, &thread_lost);
            let _ = done.send(());
        });
    if let Err(e) = started {
        tracing::error!(error = %e, "the stdout writer could not start");
        lost.cancel();
    }
    finished
}

fn run(outbox: &Outbox, mut output: Output, lost: &CancellationToken) {
    let mut lines = Vec::new();
    let mut bytes = Vec::with_capacity(64 * 1024);
    let mut broken = false;
    loop {
        let batch = outbox.take(&mut lines);
        // Records first: a line must never reach the client before what it shows is in the files.
        outbox.commit_journals();
        if !broken {
            let mut result = Ok(());
            for line in &lines {
                bytes.extend_from_slice(line.as_bytes());
                bytes.push(b'\n');
                if bytes.len() >= WRITE_CHUNK {
                    result = output.write_all(&bytes);
                    bytes.clear();
                    if result.is_err() {
                        break;
                    }
                }
            }
            if result.is_ok() && !bytes.is_empty() {
                result = output.write_all(&bytes);
            }
            bytes.clear();
            if let Err(e) = result {
                tracing::warn!(error = %e, "stdout closed; dropping further output");
                broken = true;
                lost.cancel();
            }
        }
        outbox.release(lines.len());
        lines.clear();
        // A burst can leave a large buffer behind; an idle writer keeps a small one.
        if bytes.capacity() > 4 * WRITE_CHUNK {
            bytes = Vec::with_capacity(64 * 1024);
        }
        if batch.closed {
            // Nothing is queued after the outbox closes: this batch was the last.
            break;
        }
    }
}
