//! Reading session files written by a process that may have died mid-write.
//!
//! Every record is one line, written with one `write` of the line and its newline, so a crash can leave
//! at most one incomplete record, and only at the very end: bytes without a final newline (a cut
//! record), or a run of NUL bytes (a file system that extended the file but never wrote the data, as
//! ext4 can after a power loss). Appending to such a file would glue the next record onto the torn one
//! and lose both (the bug claude-code #52387 describes), so [`repair_tail`] runs before anything is
//! appended: trailing NULs are cut, a cut record is dropped (the file is truncated back to the end of the
//! last complete record), and a last record that is complete but lacks only its newline gets the newline.
//!
//! Damage elsewhere (a garbage line, a NUL run, invalid UTF-8, an absurdly long line) is left in the file
//! and stepped over by [`RecordReader`], which yields one trimmed record at a time and lets its caller
//! count what it could not parse; a bad line never ends the read.

use std::fs::OpenOptions;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;

use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// How far back each step of the backwards scan for the last newline reads.
const SCAN_CHUNK: u64 = 64 * 1024;

/// What [`repair_tail`] found and did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TailRepair {
    /// The file is missing, empty, or ends with a complete record: nothing was changed.
    Intact,
    /// The last record was complete but had no newline; one was appended.
    Completed,
    /// `dropped` bytes at the end (a torn record and/or NUL padding) were cut off.
    Truncated {
        /// How many bytes were removed.
        dropped: u64,
    },
}

/// Makes `path` end with a complete record (or be empty), so the next append starts a fresh line.
/// Only the tail is read, however large the file. A missing file is [`TailRepair::Intact`].
pub fn repair_tail(path: &Path) -> std::io::Result<TailRepair> {
    let mut file = match OpenOptions::new().read(true).write(true).open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(TailRepair::Intact),
        Err(e) => return Err(e),
    };
    let len = file.metadata()?.len();
    if len == 0 {
        return Ok(TailRepair::Intact);
    }
    // `end`: just past the last byte that is not NUL. `start`: just past the last newline before it.
    let mut end = None;
    let mut start = None;
    let mut chunk = Vec::new();
    let mut pos = len;
    while pos > 0 && start.is_none() {
        let from = pos.saturating_sub(SCAN_CHUNK);
        chunk.resize((pos - from) as usize, 0);
        file.seek(SeekFrom::Start(from))?;
        file.read_exact(&mut chunk)?;
        for (i, &byte) in chunk.iter().enumerate().rev() {
            let at = from + i as u64;
            match (end, byte) {
                (None, 0) => {}
                (None, _) => {
                    end = Some(at + 1);
                    if byte == b'\n' {
                        start = Some(at + 1);
                        break;
                    }
                }
                (Some(_), b'\n') => {
                    start = Some(at + 1);
                    break;
                }
                (Some(_), _) => {}
            }
        }
        pos = from;
    }
    let end = end.unwrap_or(0);
    let start = start.unwrap_or(0);
    if start == end {
        // The file ends with a newline (or is all NULs): only NUL padding can need cutting.
        if end == len {
            return Ok(TailRepair::Intact);
        }
        file.set_len(end)?;
        file.sync_data()?;
        return Ok(TailRepair::Truncated { dropped: len - end });
    }
    // An unterminated last line: keep it only if it is a whole JSON object.
    let mut tail = vec![0; (end - start) as usize];
    file.seek(SeekFrom::Start(start))?;
    file.read_exact(&mut tail)?;
    if is_whole_record(&tail) {
        file.set_len(end)?;
        file.seek(SeekFrom::Start(end))?;
        file.write_all(b"\n")?;
        file.sync_data()?;
        return Ok(TailRepair::Completed);
    }
    file.set_len(start)?;
    file.sync_data()?;
    Ok(TailRepair::Truncated { dropped: len - start })
}

/// [`repair_tail`], logging what it did, for callers that go on regardless: a file that cannot be
/// checked is reported and then used as it is.
pub(crate) fn repair_tail_logged(path: &Path) {
    match repair_tail(path) {
        Ok(TailRepair::Intact) => {}
        Ok(TailRepair::Completed) => {
            tracing::warn!(path = %path.display(), "session file lacked its last newline; added");
        }
        Ok(TailRepair::Truncated { dropped }) => {
            tracing::warn!(
                path = %path.display(),
                dropped_bytes = dropped,
                "session file ended in a torn record (a crash mid-write); cut back to the last whole record"
            );
        }
        Err(e) => {
            tracing::error!(path = %path.display(), error = %e, "session file tail could not be checked");
        }
    }
}

/// A record line is one JSON object; NULs around it are padding.
fn is_whole_record(line: &[u8]) -> bool {
    let line = line.trim_ascii();
    line.first() == Some(&b'{')
        && serde_json::from_slice::<serde::de::IgnoredAny>(line).is_ok()
        && !line.contains(&0)
}

/// Lines longer than this are skipped (and counted) instead of buffered: no record we or the reference
/// write comes near it, and a file of binary garbage without newlines must not exhaust memory.
pub const MAX_RECORD_BYTES: usize = 256 * 1024 * 1024;

/// Streams the records of a JSON-lines session file: one line at a time, surrounding whitespace and NUL
/// bytes trimmed, blank lines skipped. A NUL run also separates records (a NUL can never appear inside a
/// JSON text), so records written after a NUL-padded tail are still found. Memory stays at one line.
#[derive(Debug)]
pub struct RecordReader<R> {
    reader: R,
    line: Vec<u8>,
    /// Where the unread rest of `line` starts (a line holding NULs yields several pieces).
    pos: usize,
    line_no: u64,
    skipped: u64,
    max_record_bytes: usize,
}

impl<R: AsyncBufRead + Unpin> RecordReader<R> {
    /// A reader over `reader`.
    pub fn new(reader: R) -> Self {
        Self {
            reader,
            line: Vec::new(),
            pos: 0,
            line_no: 0,
            skipped: 0,
            max_record_bytes: MAX_RECORD_BYTES,
        }
    }

    /// Changes the longest line kept (default [`MAX_RECORD_BYTES`]).
    #[cfg(test)]
    pub fn with_max_record_bytes(mut self, max: usize) -> Self {
        self.max_record_bytes = max;
        self
    }

    /// The next non-blank record, or `None` at the end of the file.
    pub async fn next_record(&mut self) -> std::io::Result<Option<&[u8]>> {
        let (start, end) = loop {
            if self.pos >= self.line.len() && !self.read_line().await? {
                return Ok(None);
            }
            let rest = &self.line[self.pos..];
            let len = memchr::memchr(0, rest).unwrap_or(rest.len());
            let piece = &rest[..len];
            let lead = piece.iter().take_while(|b| b.is_ascii_whitespace()).count();
            let trail = piece[lead..]
                .iter()
                .rev()
                .take_while(|b| b.is_ascii_whitespace())
                .count();
            let (start, end) = (self.pos + lead, self.pos + len - trail);
            self.pos += len + 1;
            if start < end {
                break (start, end);
            }
        };
        Ok(Some(&self.line[start..end]))
    }

    /// Counts the record last returned as unreadable.
    pub fn skip(&mut self) {
        self.skipped += 1;
    }

    /// Records skipped so far: counted by [`RecordReader::skip`] plus oversized lines.
    pub fn skipped(&self) -> u64 {
        self.skipped
    }

    /// The number of the line last read (1-based), for messages.
    pub fn line_no(&self) -> u64 {
        self.line_no
    }

    /// Reads the next line into `line` (newline included); false at the end of the file. An oversized
    /// line is consumed, counted and replaced by an empty one.
    async fn read_line(&mut self) -> std::io::Result<bool> {
        self.line.clear();
        self.pos = 0;
        let mut read_any = false;
        let mut oversized = false;
        loop {
            let buf = self.reader.fill_buf().await?;
            if buf.is_empty() {
                break;
            }
            read_any = true;
            let (take, done) = match memchr::memchr(b'\n', buf) {
                Some(i) => (i + 1, true),
                None => (buf.len(), false),
            };
            if !oversized {
                if self.line.len() + take > self.max_record_bytes {
                    oversized = true;
                    self.line = Vec::new();
                } else {
                    self.line.extend_from_slice(&buf[..take]);
                }
            }
            self.reader.consume(take);
            if done {
                break;
            }
        }
        if read_any {
            self.line_no += 1;
        }
        if oversized {
            tracing::warn!(
                line = self.line_no,
                max = self.max_record_bytes,
                "oversized session file line skipped"
            );
            self.skipped += 1;
        }
        Ok(read_any)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repaired(content: &[u8]) -> (TailRepair, Vec<u8>) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.jsonl");
        std::fs::write(&path, content).unwrap();
        let outcome = repair_tail(&path).unwrap();
        (outcome, std::fs::read(&path).unwrap())
    }

    #[test]
    fn complete_files_are_left_alone() {
        for content in [
            &b""[..],
            b"{\"a\":1}\n",
            b"{\"a\":1}\n{\"b\":2}\n",
            b"garbage\n{\"b\":2}\n",
        ] {
            assert_eq!(repaired(content), (TailRepair::Intact, content.to_vec()));
        }
    }

    #[test]
    fn a_missing_file_is_intact() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(repair_tail(&dir.path().join("none")).unwrap(), TailRepair::Intact);
    }

    #[test]
    fn a_cut_record_is_dropped() {
        assert_eq!(
            repaired(b"{\"a\":1}\n{\"b\":"),
            (TailRepair::Truncated { dropped: 5 }, b"{\"a\":1}\n".to_vec())
        );
        assert_eq!(
            repaired(b"{\"a\":"),
            (TailRepair::Truncated { dropped: 5 }, Vec::new())
        );
        // A cut that happens to end where a value could end is still not a whole object.
        assert_eq!(
            repaired(b"{\"a\":1}\n{\"b\":2"),
            (TailRepair::Truncated { dropped: 6 }, b"{\"a\":1}\n".to_vec())
        );
    }

    #[test]
    fn a_whole_record_without_its_newline_is_kept() {
        assert_eq!(
            repaired(b"{\"a\":1}\n{\"b\":2}"),
            (TailRepair::Completed, b"{\"a\":1}\n{\"b\":2}\n".to_vec())
        );
    }

    #[test]
    fn nul_padding_is_cut() {
        assert_eq!(
            repaired(b"{\"a\":1}\n\0\0\0\0"),
            (TailRepair::Truncated { dropped: 4 }, b"{\"a\":1}\n".to_vec())
        );
        assert_eq!(
            repaired(b"{\"a\":1}\n{\"b\"\0\0"),
            (TailRepair::Truncated { dropped: 6 }, b"{\"a\":1}\n".to_vec())
        );
        assert_eq!(
            repaired(b"{\"a\":1}\n{\"b\":2}\0\0"),
            (TailRepair::Completed, b"{\"a\":1}\n{\"b\":2}\n".to_vec())
        );
        assert_eq!(
            repaired(b"\0\0\0"),
            (TailRepair::Truncated { dropped: 3 }, Vec::new())
        );
    }

    #[test]
    fn a_torn_record_longer_than_one_scan_chunk_is_found() {
        let mut content = b"{\"a\":1}\n".to_vec();
        let whole = content.len();
        content.extend_from_slice(b"{\"big\":\"");
        content.extend(std::iter::repeat_n(b'x', 3 * SCAN_CHUNK as usize));
        let len = content.len() as u64;
        assert_eq!(
            repaired(&content),
            (
                TailRepair::Truncated {
                    dropped: len - whole as u64
                },
                b"{\"a\":1}\n".to_vec()
            )
        );
    }

    #[test]
    fn appending_after_a_repair_never_glues_records() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.jsonl");
        std::fs::write(&path, b"{\"a\":1}\n{\"torn\":tr").unwrap();
        repair_tail(&path).unwrap();
        let mut file = OpenOptions::new().append(true).open(&path).unwrap();
        file.write_all(b"{\"c\":3}\n").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"{\"a\":1}\n{\"c\":3}\n");
    }

    async fn records(content: &[u8], max: usize) -> (Vec<String>, u64) {
        let mut reader = RecordReader::new(content).with_max_record_bytes(max);
        let mut out = Vec::new();
        while let Some(record) = reader.next_record().await.unwrap() {
            out.push(String::from_utf8_lossy(record).into_owned());
        }
        (out, reader.skipped())
    }

    #[tokio::test]
    async fn records_are_trimmed_and_blank_lines_skipped() {
        let (got, skipped) = records(b"  {\"a\":1}\r\n\n\t\n{\"b\":2}", 1024).await;
        assert_eq!(got, vec!["{\"a\":1}", "{\"b\":2}"]);
        assert_eq!(skipped, 0);
    }

    #[tokio::test]
    async fn nul_runs_separate_records() {
        let (got, _) = records(
            b"{\"a\":1}\n\0\0\0{\"b\":2}\n{\"c\":3}\0\0{\"d\":4}\n\0\0\n",
            1024,
        )
        .await;
        assert_eq!(got, vec!["{\"a\":1}", "{\"b\":2}", "{\"c\":3}", "{\"d\":4}"]);
    }

    #[tokio::test]
    async fn an_oversized_line_is_skipped_and_counted_and_reading_goes_on() {
        let mut content = b"{\"a\":1}\n".to_vec();
        content.extend(std::iter::repeat_n(b'x', 100));
        content.extend_from_slice(b"\n{\"b\":2}\n");
        let (got, skipped) = records(&content, 50).await;
        assert_eq!(got, vec!["{\"a\":1}", "{\"b\":2}"]);
        assert_eq!(skipped, 1);
    }

    #[tokio::test]
    async fn line_numbers_follow_the_file() {
        let mut reader = RecordReader::new(&b"{}\n\n{}\n"[..]);
        reader.next_record().await.unwrap();
        assert_eq!(reader.line_no(), 1);
        reader.next_record().await.unwrap();
        assert_eq!(reader.line_no(), 3);
        assert!(reader.next_record().await.unwrap().is_none());
    }
}
