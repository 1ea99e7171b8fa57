//! One writer per session file.
//!
//! Callers queue whole lines; the writer appends each with a single `write` of line + newline, so a crash
//! loses at most the record being written and never interleaves two records. The writer is a small
//! thread of its own doing plain blocking writes (one syscall per record, no async file shim with a
//! buffer of its own in between), so a record queued is in the kernel microseconds later; a caller that
//! must know it is there awaits [`LineWriter::write`]. `flush` returns once everything queued before it
//! was written; `sync` once it is on disk (fsync), which the loop asks for at turn end. A failed write is
//! remembered and reported to every later caller, so the agent can tell the client instead of silently
//! losing history. Before its first append to a file the writer repairs the file's tail
//! ([`super::reader::repair_tail`]), so a record torn by an earlier crash is never glued to the next one.
//! The thread ends when the last handle is dropped.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::mpsc;

use tokio::sync::oneshot;

type Ack = oneshot::Sender<Result<(), String>>;

enum Command {
    /// Append one line; acknowledged once written when the caller asked.
    Line(String, Option<Ack>),
    /// Move the file to the given path and start a new, empty one at the original path.
    Rotate(PathBuf, Ack),
    Flush(Ack),
    Sync(Ack),
}

/// A cheap, clonable handle to the writer of one file.
#[derive(Debug, Clone)]
pub struct LineWriter {
    path: PathBuf,
    tx: mpsc::Sender<Command>,
}

/// Why a file could not be written.
#[derive(Debug, Clone, thiserror::Error)]
#[error("cannot write {path}: {message}")]
pub struct WriteError {
    /// The file.
    pub path: PathBuf,
    /// What went wrong.
    pub message: String,
}

impl LineWriter {
    /// Starts the writer for `path` (created if missing, appended to otherwise).
    pub fn spawn(path: &Path) -> Self {
        let (tx, rx) = mpsc::channel();
        let thread_path = path.to_path_buf();
        let started = std::thread::Builder::new()
            .name("session-writer".into())
            .spawn(move || run(&thread_path, &rx));
        if let Err(e) = started {
            // Every later call reports the writer as stopped.
            tracing::error!(path = %path.display(), error = %e, "session file writer not started");
        }
        Self {
            path: path.to_path_buf(),
            tx,
        }
    }

    /// The file this writer appends to.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Queues one record (without its newline). Never waits, so a sequence of appends cannot be cut in
    /// half by a cancelled caller; the queue is unbounded because its producers are themselves paced by
    /// the client's stdout queue and the model.
    pub fn append(&self, line: String) -> Result<(), WriteError> {
        self.tx.send(Command::Line(line, None)).map_err(|_| self.closed())
    }

    /// Queues one record like [`LineWriter::append`]; the returned future completes once the record is
    /// written (handed to the OS). The record is queued even if the future is never awaited.
    pub fn write(&self, line: String) -> impl Future<Output = Result<(), WriteError>> + use<> {
        let (ack, done) = oneshot::channel();
        let queued = self
            .tx
            .send(Command::Line(line, Some(ack)))
            .map_err(|_| self.closed());
        let path = self.path.clone();
        async move {
            queued?;
            wait(path, done).await
        }
    }

    /// Waits until every queued record reached the OS.
    pub async fn flush(&self) -> Result<(), WriteError> {
        self.ack(Command::Flush).await
    }

    /// Waits until every queued record is durable on disk.
    pub async fn sync(&self) -> Result<(), WriteError> {
        self.ack(Command::Sync).await
    }

    /// Moves everything written so far to `to` and continues in a new, empty file (`/clear`,
    /// compaction). Records queued before the call go to the old file.
    pub async fn rotate(&self, to: PathBuf) -> Result<(), WriteError> {
        self.ack(|ack| Command::Rotate(to, ack)).await
    }

    async fn ack(&self, make: impl FnOnce(Ack) -> Command) -> Result<(), WriteError> {
        let (ack, done) = oneshot::channel();
        self.tx.send(make(ack)).map_err(|_| self.closed())?;
        wait(self.path.clone(), done).await
    }

    fn closed(&self) -> WriteError {
        WriteError {
            path: self.path.clone(),
            message: "writer stopped".into(),
        }
    }
}

async fn wait(path: PathBuf, done: oneshot::Receiver<Result<(), String>>) -> Result<(), WriteError> {
    match done.await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(message)) => Err(WriteError { path, message }),
        Err(_) => Err(WriteError {
            path,
            message: "writer stopped".into(),
        }),
    }
}

fn run(path: &Path, rx: &mpsc::Receiver<Command>) {
    let mut file: Option<File> = None;
    let mut failure: Option<String> = None;
    while let Ok(command) = rx.recv() {
        match command {
            Command::Line(mut line, ack) => {
                let result = match &failure {
                    Some(message) => Err(message.clone()),
                    None => {
                        line.push('\n');
                        let written = open(path, &mut file).and_then(|f| f.write_all(line.as_bytes()));
                        written.map_err(|e| {
                            tracing::error!(path = %path.display(), error = %e, "session file write failed");
                            let message = e.to_string();
                            failure = Some(message.clone());
                            message
                        })
                    }
                };
                if let Some(ack) = ack {
                    let _ = ack.send(result);
                }
            }
            Command::Rotate(to, ack) => {
                // Writes are unbuffered: dropping the file loses nothing.
                file = None;
                let result = std::fs::rename(path, &to)
                    // The new file exists at once, even before its first record.
                    .and_then(|()| crate::private_files::create(path).map(drop))
                    .map_err(|e| e.to_string());
                if let Err(message) = &result {
                    tracing::error!(path = %path.display(), error = %message, "rotation failed");
                }
                let _ = ack.send(result);
            }
            Command::Flush(ack) => {
                // Every earlier record was written by the time this command is taken off the queue.
                let _ = ack.send(failure.clone().map_or(Ok(()), Err));
            }
            Command::Sync(ack) => {
                let result = match (&failure, file.as_mut()) {
                    (Some(message), _) => Err(message.clone()),
                    (None, Some(f)) => f.sync_data().map_err(|e| e.to_string()),
                    (None, None) => Ok(()),
                };
                let _ = ack.send(result);
            }
        }
    }
}

fn open<'a>(path: &Path, file: &'a mut Option<File>) -> std::io::Result<&'a mut File> {
    if file.is_none() {
        if let Some(parent) = path.parent() {
            crate::private_files::create_dir_all(parent)?;
        }
        super::reader::repair_tail_logged(path);
        let opened = crate::private_files::open_append(path)?;
        *file = Some(opened);
    }
    file.as_mut()
        .ok_or_else(|| std::io::Error::other("file not open"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn appends_whole_lines_and_acks_flush_and_sync() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/x.jsonl");
        let writer = LineWriter::spawn(&path);
        writer.append("{\"a\":1}".into()).unwrap();
        writer.append("{\"b\":2}".into()).unwrap();
        writer.sync().await.unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{\"a\":1}\n{\"b\":2}\n");
    }

    #[tokio::test]
    async fn rotation_moves_the_old_records_and_starts_a_new_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("context.jsonl");
        let writer = LineWriter::spawn(&path);
        writer.append("old".into()).unwrap();
        writer.rotate(dir.path().join("context_1.jsonl")).await.unwrap();
        writer.append("new".into()).unwrap();
        writer.flush().await.unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.path().join("context_1.jsonl")).unwrap(),
            "old\n"
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new\n");
    }

    #[tokio::test]
    async fn a_torn_tail_left_by_a_crash_is_cut_before_the_first_append() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wire.jsonl");
        std::fs::write(&path, "{\"a\":1}\n{\"torn\": \"rec").unwrap();
        let writer = LineWriter::spawn(&path);
        writer.append("{\"b\":2}".into()).unwrap();
        writer.flush().await.unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{\"a\":1}\n{\"b\":2}\n");
    }

    #[tokio::test]
    async fn an_acknowledged_write_is_in_the_file_when_it_returns() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.jsonl");
        let writer = LineWriter::spawn(&path);
        for i in 0..100 {
            writer.write(format!("{{\"n\":{i}}}")).await.unwrap();
            let text = std::fs::read_to_string(&path).unwrap();
            assert_eq!(text.lines().count(), i + 1);
        }
    }

    #[tokio::test]
    async fn a_failed_write_is_reported_to_later_callers() {
        let dir = tempfile::tempdir().unwrap();
        // A directory where the file should be makes every write fail.
        let path = dir.path().join("blocked");
        std::fs::create_dir(&path).unwrap();
        let writer = LineWriter::spawn(&path);
        writer.append("x".into()).unwrap();
        let err = writer.flush().await.unwrap_err();
        assert_eq!(err.path, path);
    }
}
