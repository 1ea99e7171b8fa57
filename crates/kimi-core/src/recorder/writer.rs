//! Session files (`wire.jsonl`, `context.jsonl`): records appended in memory, written in batches.
//!
//! Appending a record copies it into the file's buffer: no system call, no other thread. The buffer is
//! written with one `write` per batch (group commit) by whoever commits it: the stdout writer, before
//! each batch of lines it sends to the client (the file is attached to the client as a
//! [`kimi_wire::Journal`], see [`SessionFile::attach`]), or the agent when it must know the records are
//! there (before asking the model, at the end of a turn). A commit holds the file's lock while it writes,
//! so records keep their order and no two batches interleave; a crash loses at most what was not
//! committed, which, since the stdout writer commits before it writes, is never the record of an event
//! the client has read. `sync` adds an fsync, which the loop asks for at turn end.
//!
//! A failed write is remembered and returned by every later append, commit and sync, so the agent can
//! tell the client instead of silently losing history. Before its first write to a file the writer
//! repairs the file's tail ([`super::reader::repair_tail`]), so a record torn by an earlier crash is never
//! glued to the next one. Dropping the last handle commits what is left.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use kimi_wire::{ClientHandle, Journal, JournalLink};

/// Buffered bytes past which an append writes the batch itself instead of waiting for a commit (a file
/// no writer commits, or a burst faster than the writer).
const COMMIT_AT: usize = 256 * 1024;

/// A cheap, clonable handle to one session file.
#[derive(Debug, Clone)]
pub struct SessionFile {
    shared: Arc<Shared>,
    /// The stdout writer that commits this file before each batch of lines, when there is a client.
    link: Option<JournalLink>,
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

#[derive(Debug)]
struct Shared {
    path: PathBuf,
    /// Records not yet written, each ending in its newline. Held for a copy, never across a write.
    pending: Mutex<Vec<u8>>,
    /// Held while a batch is written, so batches go out in the order they were taken.
    file: Mutex<Disk>,
    /// Set with [`Disk::failure`], so appends learn of a failure without taking the file's lock.
    failed: AtomicBool,
}

#[derive(Debug, Default)]
struct Disk {
    file: Option<File>,
    /// The first write failure; every later write is refused with it.
    failure: Option<String>,
    /// The buffer of the batch being written, kept to take the next batch into (no allocation per batch).
    spare: Vec<u8>,
}

impl SessionFile {
    /// A writer for `path` (created at the first commit if missing, appended to otherwise). With a
    /// `client`, its stdout writer commits this file before each batch of lines it writes: a record
    /// appended before an event line is queued is then in the file before the client reads that line.
    pub fn new(path: &Path, client: Option<&ClientHandle>) -> Self {
        let shared = Arc::new(Shared {
            path: path.to_path_buf(),
            pending: Mutex::new(Vec::new()),
            file: Mutex::new(Disk::default()),
            failed: AtomicBool::new(false),
        });
        let link = client.map(|client| {
            let journal: Arc<dyn Journal> = shared.clone();
            client.attach_journal(Arc::downgrade(&journal))
        });
        Self { shared, link }
    }

    /// The file this writer appends to.
    pub fn path(&self) -> &Path {
        &self.shared.path
    }

    /// Appends one record (without its newline). Never waits for a write, so a sequence of appends
    /// cannot be cut in half by a cancelled caller. Fails once a write of this file has failed.
    pub fn append(&self, record: &str) -> Result<(), WriteError> {
        self.append_pieces(&[record.as_bytes()])
    }

    /// Appends one record made of `pieces` (without its newline), as [`SessionFile::append`].
    pub fn append_pieces(&self, pieces: &[&[u8]]) -> Result<(), WriteError> {
        let first_pending = self.shared.append(pieces)?;
        // The stdout writer commits before its next batch; if no line is coming, it still should.
        if first_pending && let Some(link) = &self.link {
            link.pending();
        }
        Ok(())
    }

    /// The first failed write, if any; no I/O.
    pub fn check(&self) -> Result<(), WriteError> {
        if self.shared.failed.load(Ordering::Acquire) {
            return Err(self.shared.failure());
        }
        Ok(())
    }

    /// Writes every record appended so far; returns once they are in the OS.
    pub fn commit(&self) -> Result<(), WriteError> {
        self.shared.write_pending()
    }

    /// Waits until every record appended so far is durable on disk.
    pub async fn sync(&self) -> Result<(), WriteError> {
        self.shared.write_pending()?;
        let file = {
            let disk = self.shared.lock_file();
            match disk.file.as_ref().map(File::try_clone) {
                None => return Ok(()),
                Some(Ok(file)) => file,
                Some(Err(e)) => return Err(self.shared.error(e.to_string())),
            }
        };
        // On the blocking pool: an fsync can take milliseconds, and the agent's thread serves the client.
        match tokio::task::spawn_blocking(move || file.sync_data()).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(self.shared.error(e.to_string())),
            Err(e) => Err(self.shared.error(e.to_string())),
        }
    }

    /// Moves everything written so far to `to` and continues in a new, empty file (`/clear`,
    /// compaction). Records appended before the call go to the old file.
    pub fn rotate(&self, to: &Path) -> Result<(), WriteError> {
        self.shared.write_pending()?;
        let mut disk = self.shared.lock_file();
        // Writes are unbuffered: closing the file loses nothing.
        disk.file = None;
        let result = std::fs::rename(&self.shared.path, to)
            // The new file exists at once, even before its first record.
            .and_then(|()| crate::private_files::create(&self.shared.path).map(drop));
        result.map_err(|e| {
            tracing::error!(path = %self.shared.path.display(), error = %e, "rotation failed");
            self.shared.error(e.to_string())
        })
    }
}

impl Shared {
    /// Buffers one record; returns whether it is the first one waiting for a commit (then the writer
    /// that commits this file should hear of it).
    fn append(&self, pieces: &[&[u8]]) -> Result<bool, WriteError> {
        if self.failed.load(Ordering::Acquire) {
            return Err(self.failure());
        }
        let (was_empty, len) = {
            let mut pending = crate::sync::lock(&self.pending);
            let was_empty = pending.is_empty();
            for piece in pieces {
                pending.extend_from_slice(piece);
            }
            pending.push(b'\n');
            (was_empty, pending.len())
        };
        if len >= COMMIT_AT {
            return self.write_pending().map(|()| false);
        }
        Ok(was_empty)
    }

    fn write_pending(&self) -> Result<(), WriteError> {
        let mut disk = self.lock_file();
        if let Some(message) = &disk.failure {
            return Err(self.error(message.clone()));
        }
        let mut batch = std::mem::take(&mut disk.spare);
        {
            let mut pending = crate::sync::lock(&self.pending);
            std::mem::swap(&mut batch, &mut *pending);
        }
        if batch.is_empty() {
            disk.spare = batch;
            return Ok(());
        }
        let written = open(&self.path, &mut disk.file).and_then(|f| f.write_all(&batch));
        batch.clear();
        disk.spare = batch;
        written.map_err(|e| {
            tracing::error!(path = %self.path.display(), error = %e, "session file write failed");
            let message = e.to_string();
            disk.failure = Some(message.clone());
            self.failed.store(true, Ordering::Release);
            self.error(message)
        })
    }

    fn failure(&self) -> WriteError {
        let message = self.lock_file().failure.clone().unwrap_or_default();
        self.error(message)
    }

    fn error(&self, message: String) -> WriteError {
        WriteError {
            path: self.path.clone(),
            message,
        }
    }

    fn lock_file(&self) -> MutexGuard<'_, Disk> {
        crate::sync::lock(&self.file)
    }
}

impl Journal for Shared {
    fn commit(&self) {
        // A failure is remembered and reported to the agent by its next append, commit or sync.
        let _ = self.write_pending();
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        let _ = self.write_pending();
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
    async fn appends_whole_lines_and_syncs() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/x.jsonl");
        let file = SessionFile::new(&path, None);
        file.append("{\"a\":1}").unwrap();
        file.append_pieces(&[b"{\"b\"", b":2}"]).unwrap();
        assert!(!path.exists(), "nothing is written before a commit");
        file.sync().await.unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{\"a\":1}\n{\"b\":2}\n");
    }

    #[test]
    fn rotation_moves_the_old_records_and_starts_a_new_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("context.jsonl");
        let file = SessionFile::new(&path, None);
        file.append("old").unwrap();
        file.rotate(&dir.path().join("context_1.jsonl")).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "");
        file.append("new").unwrap();
        file.commit().unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.path().join("context_1.jsonl")).unwrap(),
            "old\n"
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new\n");
    }

    #[test]
    fn a_torn_tail_left_by_a_crash_is_cut_before_the_first_write() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wire.jsonl");
        std::fs::write(&path, "{\"a\":1}\n{\"torn\": \"rec").unwrap();
        let file = SessionFile::new(&path, None);
        file.append("{\"b\":2}").unwrap();
        file.commit().unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{\"a\":1}\n{\"b\":2}\n");
    }

    #[test]
    fn a_committed_batch_is_in_the_file_when_commit_returns() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.jsonl");
        let file = SessionFile::new(&path, None);
        for i in 0..100 {
            file.append(&format!("{{\"n\":{i}}}")).unwrap();
            file.commit().unwrap();
            let text = std::fs::read_to_string(&path).unwrap();
            assert_eq!(text.lines().count(), i + 1);
        }
    }

    #[test]
    fn what_is_left_is_written_when_the_last_handle_goes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.jsonl");
        let file = SessionFile::new(&path, None);
        file.append("last").unwrap();
        drop(file);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "last\n");
    }

    #[test]
    fn a_large_backlog_is_written_without_a_commit() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.jsonl");
        let file = SessionFile::new(&path, None);
        let record = "x".repeat(1000);
        for _ in 0..(COMMIT_AT / 1000 + 1) {
            file.append(&record).unwrap();
        }
        assert!(std::fs::metadata(&path).unwrap().len() >= COMMIT_AT as u64);
    }

    #[test]
    fn a_failed_write_is_reported_to_later_callers() {
        let dir = tempfile::tempdir().unwrap();
        // A directory where the file should be makes every write fail.
        let path = dir.path().join("blocked");
        std::fs::create_dir(&path).unwrap();
        let file = SessionFile::new(&path, None);
        file.append("x").unwrap();
        let err = file.commit().unwrap_err();
        assert_eq!(err.path, path);
        assert!(file.append("y").is_err());
        assert!(file.commit().is_err());
    }
}
