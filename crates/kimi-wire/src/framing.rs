//! Newline-delimited framing with a hard cap on line length.
//!
//! tokio-util's `LinesCodec` ends the whole stream after one oversized line (tokio#3976), and an unbounded
//! `lines()` lets a client grow our memory without limit. This reader keeps at most `max_line_bytes` of a
//! line; the rest of an oversized line is read and dropped, and the caller is told so it can answer and
//! keep serving. Nothing is preallocated beyond what the line in hand needs.

use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// The default cap: generous for pasted files and images, small enough to bound memory.
pub const DEFAULT_MAX_LINE_BYTES: usize = 64 * 1024 * 1024;

/// One unit of input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Inbound {
    /// A line with content, decoded as UTF-8 (invalid bytes replaced, as the reference does) and trimmed.
    Line(String),
    /// A line with nothing but whitespace; the reference answers it with -32700.
    Blank,
    /// A line longer than the cap; its bytes were discarded.
    Oversized {
        /// How many bytes the line had (without the newline).
        len: usize,
    },
    /// The client closed its end.
    Eof,
}

/// Reads capped lines from any buffered async reader.
#[derive(Debug)]
pub struct LineReader<R> {
    inner: R,
    max_line_bytes: usize,
    buf: Vec<u8>,
}

impl<R: AsyncBufRead + Unpin> LineReader<R> {
    /// Wraps `inner`; lines longer than `max_line_bytes` are reported as [`Inbound::Oversized`].
    pub fn new(inner: R, max_line_bytes: usize) -> Self {
        Self {
            inner,
            max_line_bytes,
            buf: Vec::new(),
        }
    }

    /// Reads the next line. I/O errors are returned as is; the caller treats them as the end of input.
    pub async fn next(&mut self) -> std::io::Result<Inbound> {
        self.buf.clear();
        let mut len = 0usize;
        let mut oversized = false;
        loop {
            let chunk = self.inner.fill_buf().await?;
            if chunk.is_empty() {
                // EOF: a final line without a newline still counts as a line.
                if len == 0 {
                    return Ok(Inbound::Eof);
                }
                return Ok(self.finish(len, oversized));
            }
            let (take, done) = match memchr::memchr(b'\n', chunk) {
                Some(i) => (i, true),
                None => (chunk.len(), false),
            };
            len += take;
            if !oversized {
                if len > self.max_line_bytes {
                    oversized = true;
                    // Give the memory back: an oversized line must not pin a huge buffer.
                    self.buf = Vec::new();
                } else {
                    self.buf.extend_from_slice(&chunk[..take]);
                }
            }
            let consumed = if done { take + 1 } else { take };
            self.inner.consume(consumed);
            if done {
                return Ok(self.finish(len, oversized));
            }
        }
    }

    fn finish(&mut self, len: usize, oversized: bool) -> Inbound {
        if oversized {
            return Inbound::Oversized { len };
        }
        let text = String::from_utf8_lossy(&self.buf);
        let trimmed = text.trim();
        if trimmed.is_empty() {
            Inbound::Blank
        } else {
            Inbound::Line(trimmed.to_owned())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::BufReader;

    async fn read_all(input: &[u8], cap: usize, buf_size: usize) -> Vec<Inbound> {
        let mut reader = LineReader::new(BufReader::with_capacity(buf_size, input), cap);
        let mut out = Vec::new();
        loop {
            let item = reader.next().await.unwrap();
            let end = item == Inbound::Eof;
            out.push(item);
            if end {
                return out;
            }
        }
    }

    #[tokio::test]
    async fn splits_lines_trims_and_reports_blank_lines() {
        for buf_size in [1, 3, 8192] {
            let got = read_all(b"{\"a\":1}\r\n\n  \nlast", 100, buf_size).await;
            assert_eq!(
                got,
                vec![
                    Inbound::Line("{\"a\":1}".into()),
                    Inbound::Blank,
                    Inbound::Blank,
                    Inbound::Line("last".into()),
                    Inbound::Eof
                ],
                "buffer size {buf_size}"
            );
        }
    }

    #[tokio::test]
    async fn an_oversized_line_is_skipped_and_reading_goes_on() {
        for buf_size in [1, 4, 8192] {
            let mut input = vec![b'x'; 50];
            input.extend_from_slice(b"\nok\n");
            let got = read_all(&input, 10, buf_size).await;
            assert_eq!(
                got,
                vec![
                    Inbound::Oversized { len: 50 },
                    Inbound::Line("ok".into()),
                    Inbound::Eof
                ]
            );
        }
    }

    #[tokio::test]
    async fn a_line_exactly_at_the_cap_is_accepted() {
        let got = read_all(b"0123456789\n", 10, 3).await;
        assert_eq!(got, vec![Inbound::Line("0123456789".into()), Inbound::Eof]);
    }

    #[tokio::test]
    async fn invalid_utf8_is_replaced_not_fatal() {
        let got = read_all(b"a\xffb\n", 10, 8192).await;
        assert_eq!(got, vec![Inbound::Line("a\u{fffd}b".into()), Inbound::Eof]);
    }
}
