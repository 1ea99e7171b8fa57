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

#[cfg(test)]
mod tests {
    use std::sync::{Mutex, Weak};

    use super::super::outbox::Journal;
    use super::*;

    /// What reached the files and the client, in the order it got there.
    type Log = Arc<Mutex<Vec<String>>>;

    /// A session file: records are held until the writer commits them.
    struct FakeJournal {
        held: Mutex<Vec<String>>,
        log: Log,
    }

    impl FakeJournal {
        fn record(&self, outbox: &Outbox, record: &str) {
            crate::sync::lock(&self.held).push(record.to_owned());
            outbox.journal_pending();
        }
    }

    impl Journal for FakeJournal {
        fn commit(&self) {
            let held = std::mem::take(&mut *crate::sync::lock(&self.held));
            crate::sync::lock(&self.log).extend(held.into_iter().map(|r| format!("file {r}")));
        }
    }

    /// The client's end of stdout: one log entry per line, or a closed pipe.
    struct FakeStdout {
        log: Log,
        broken: bool,
    }

    impl Write for FakeStdout {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            if self.broken {
                return Err(std::io::ErrorKind::BrokenPipe.into());
            }
            let text = std::str::from_utf8(bytes).unwrap();
            let mut log = crate::sync::lock(&self.log);
            log.extend(text.split_terminator('\n').map(|line| format!("client {line}")));
            Ok(bytes.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn setup(broken: bool) -> (Arc<Outbox>, Arc<FakeJournal>, Output, Log) {
        let log = Log::default();
        let outbox = Outbox::new();
        let journal = Arc::new(FakeJournal {
            held: Mutex::default(),
            log: Arc::clone(&log),
        });
        let as_journal: Arc<dyn Journal> = journal.clone();
        outbox.attach(Arc::downgrade(&as_journal) as Weak<dyn Journal>);
        let output = Output::Blocking(Box::new(FakeStdout {
            log: Arc::clone(&log),
            broken,
        }));
        (outbox, journal, output, log)
    }

    #[tokio::test]
    async fn every_line_reaches_the_client_after_the_records_handed_over_before_it() {
        let (outbox, journal, output, log) = setup(false);
        let finished = spawn(Arc::clone(&outbox), output, CancellationToken::new());
        for step in 0..200 {
            journal.record(&outbox, &format!("record {step}"));
            outbox.send(format!("event {step}")).await.unwrap();
        }
        outbox.close();
        finished.await.unwrap();

        let log = crate::sync::lock(&log).clone();
        assert_eq!(
            log.len(),
            400,
            "every record and every line arrives once: {log:?}"
        );
        for step in 0..200 {
            let at = |entry: String| log.iter().position(|e| *e == entry).unwrap();
            assert!(
                at(format!("file record {step}")) < at(format!("client event {step}")),
                "event {step} reached the client before its record: {log:?}"
            );
        }
    }

    #[test]
    fn a_journal_record_with_no_line_is_still_committed() {
        let (outbox, journal, output, log) = setup(false);
        journal.record(&outbox, "turn end");
        outbox.close();
        run(&outbox, output, &CancellationToken::new());
        assert_eq!(*crate::sync::lock(&log), ["file turn end"]);
    }

    #[tokio::test]
    async fn a_closed_stdout_fires_lost_and_the_writer_keeps_draining() {
        let (outbox, journal, output, log) = setup(true);
        let lost = CancellationToken::new();
        let finished = spawn(Arc::clone(&outbox), output, lost.clone());
        outbox.send("first".into()).await.unwrap();
        // A hang guard on the awaited event, not a measured duration.
        tokio::time::timeout(std::time::Duration::from_secs(30), lost.cancelled())
            .await
            .expect("the broken pipe is reported");
        // Twice the capacity: senders would block forever if dropped lines kept their places.
        for i in 0..2 * OUTBOX_CAPACITY {
            journal.record(&outbox, &format!("record {i}"));
            outbox.send(format!("line {i}")).await.unwrap();
        }
        outbox.close();
        finished.await.unwrap();
        let log = crate::sync::lock(&log).clone();
        assert!(
            log.iter().all(|e| e.starts_with("file ")),
            "nothing reached the client: {log:?}"
        );
        assert_eq!(log.len(), 2 * OUTBOX_CAPACITY, "the files are still written");
    }

    #[test]
    fn a_batch_larger_than_a_write_chunk_goes_out_whole_and_in_order() {
        let (outbox, _journal, output, log) = setup(false);
        let line = "x".repeat(1000);
        let count = OUTBOX_CAPACITY;
        futures::executor::block_on(async {
            for i in 0..count {
                outbox.send(format!("{i} {line}")).await.unwrap();
            }
        });
        assert!(count * line.len() > WRITE_CHUNK);
        outbox.close();
        run(&outbox, output, &CancellationToken::new());
        let log = crate::sync::lock(&log).clone();
        let expected: Vec<String> = (0..count).map(|i| format!("client {i} {line}")).collect();
        assert_eq!(log, expected);
    }
}
