//! One writer task per session file.
//!
//! Callers queue whole lines; the task appends each with a single `write_all` of line + newline, so a
//! crash loses at most the record being written and never interleaves two records. `flush` returns once
//! everything queued is handed to the OS; `sync` once it is on disk (fsync), which the loop asks for at
//! turn end. A failed write is remembered and reported to every later caller, so the agent can tell the
//! client instead of silently losing history.

use std::path::{Path, PathBuf};

use tokio::io::AsyncWriteExt;
use tokio::sync::{mpsc, oneshot};

enum Command {
    Line(String),
    /// Move the file to the given path and start a new, empty one at the original path.
    Rotate(PathBuf, oneshot::Sender<Result<(), String>>),
    Flush(oneshot::Sender<Result<(), String>>),
    Sync(oneshot::Sender<Result<(), String>>),
}

/// A cheap, clonable handle to the writer task of one file.
#[derive(Debug, Clone)]
pub struct LineWriter {
    path: PathBuf,
    tx: mpsc::UnboundedSender<Command>,
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
    /// Starts the writer task for `path` (created if missing, appended to otherwise).
    pub fn spawn(path: &Path) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(run(path.to_path_buf(), rx));
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
        self.tx.send(Command::Line(line)).map_err(|_| self.closed())
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
        let (tx, rx) = oneshot::channel();
        self.tx.send(Command::Rotate(to, tx)).map_err(|_| self.closed())?;
        match rx.await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(message)) => Err(WriteError {
                path: self.path.clone(),
                message,
            }),
            Err(_) => Err(self.closed()),
        }
    }

    async fn ack(&self, make: fn(oneshot::Sender<Result<(), String>>) -> Command) -> Result<(), WriteError> {
        let (tx, rx) = oneshot::channel();
        self.tx.send(make(tx)).map_err(|_| self.closed())?;
        match rx.await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(message)) => Err(WriteError {
                path: self.path.clone(),
                message,
            }),
            Err(_) => Err(self.closed()),
        }
    }

    fn closed(&self) -> WriteError {
        WriteError {
            path: self.path.clone(),
            message: "writer stopped".into(),
        }
    }
}

async fn run(path: PathBuf, mut rx: mpsc::UnboundedReceiver<Command>) {
    let mut file: Option<tokio::fs::File> = None;
    let mut failure: Option<String> = None;
    while let Some(command) = rx.recv().await {
        match command {
            Command::Line(mut line) => {
                if failure.is_some() {
                    continue;
                }
                line.push('\n');
                let result = match open(&path, &mut file).await {
                    Ok(f) => f.write_all(line.as_bytes()).await,
                    Err(e) => Err(e),
                };
                if let Err(e) = result {
                    tracing::error!(path = %path.display(), error = %e, "session file write failed");
                    failure = Some(e.to_string());
                }
            }
            Command::Rotate(to, ack) => {
                let result = async {
                    if let Some(mut f) = file.take() {
                        f.flush().await?;
                    }
                    tokio::fs::rename(&path, &to).await?;
                    // The new file exists at once, even before its first record.
                    tokio::fs::File::create(&path).await.map(drop)
                }
                .await
                .map_err(|e| e.to_string());
                if let Err(message) = &result {
                    tracing::error!(path = %path.display(), error = %message, "rotation failed");
                }
                let _ = ack.send(result);
            }
            Command::Flush(ack) => {
                let result = match (&failure, file.as_mut()) {
                    (Some(message), _) => Err(message.clone()),
                    (None, Some(f)) => f.flush().await.map_err(|e| e.to_string()),
                    (None, None) => Ok(()),
                };
                let _ = ack.send(result);
            }
            Command::Sync(ack) => {
                let result = match (&failure, file.as_mut()) {
                    (Some(message), _) => Err(message.clone()),
                    (None, Some(f)) => match f.flush().await {
                        Ok(()) => f.sync_data().await.map_err(|e| e.to_string()),
                        Err(e) => Err(e.to_string()),
                    },
                    (None, None) => Ok(()),
                };
                let _ = ack.send(result);
            }
        }
    }
}

async fn open<'a>(
    path: &Path,
    file: &'a mut Option<tokio::fs::File>,
) -> std::io::Result<&'a mut tokio::fs::File> {
    if file.is_none() {
        if let Some(parent) = path.parent() {
            tokio::fs::create_dir_all(parent).await?;
        }
        let opened = tokio::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .await?;
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
