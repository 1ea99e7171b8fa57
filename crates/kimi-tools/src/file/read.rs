//! `ReadFile`: numbered lines of a text file, a window at a time.
//!
//! Reference: `kimi_cli/tools/file/read.py`. The file is read as Python reads text: UTF-8 with
//! invalid bytes replaced, and `\r\n` or a lone `\r` ending a line like `\n` (the model sees `\n`).
//! A positive `line_offset` reads forward from that line; a negative one reads the last lines. At
//! most [`MAX_LINES`] lines or about [`MAX_BYTES`] bytes come back, each line cut at
//! [`MAX_LINE_LENGTH`] characters; the message always gives the file's total line count.
//!
//! Beyond the reference: the file is judged by its real path (`access`): secrets are refused, a file
//! outside the workspace is read only after the user approves, and the file read is the one judged.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::Path;
use std::sync::Arc;

use futures::future::BoxFuture;
use kimi_core::Environment;
use kimi_core::{CallContext, Plan, Tool, parse_args};
use kimi_llm::ToolSpec;
use kimi_wire::message::ToolReturnValue;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::access::admit_read;
use super::file_type::{FileKind, MEDIA_SNIFF_BYTES, detect_file_type};
use super::paths::resolve_tool_path;
use super::real_path::{OpenFor, open_real};
use super::scope::Target;
use super::{FileSettings, blocking, tool_error, tool_spec};
use crate::args;
use crate::output::truncate_line;

/// Most lines returned by one call (and the largest negative offset).
pub const MAX_LINES: usize = 1000;
/// Characters kept of one line (line break included); longer lines end in `...`.
pub const MAX_LINE_LENGTH: usize = 2000;
/// Bytes (UTF-8, after cutting long lines) after which reading stops.
pub const MAX_BYTES: usize = 100 << 10;

// Arguments of `ReadFile`. Field doc comments are the parameter descriptions the model reads (one line
// each, as schemars keeps line breaks); the struct itself has none, as the reference's schema has none.
#[derive(Debug, Deserialize, JsonSchema)]
struct ReadParams {
    /// File to read. Relative paths start at the working directory; files outside it need an absolute path.
    path: String,
    /// Line to start at, counting from 1. Negative values count from the end (-50 reads the last 50 lines); not 0, not below -1000.
    #[serde(default = "default_line_offset")]
    #[schemars(schema_with = "crate::args::plain_integer")]
    line_offset: i64,
    /// How many lines to return; 1000, the default, is also the most one call returns. Page through big files with `line_offset`.
    #[serde(default = "default_n_lines")]
    #[schemars(schema_with = "crate::args::plain_integer", range(min = 1))]
    n_lines: i64,
}

fn default_line_offset() -> i64 {
    1
}

fn default_n_lines() -> i64 {
    MAX_LINES as i64
}

impl ReadParams {
    /// The checks the reference's argument model makes, with its wording.
    fn validate(&self) -> Result<(), ToolReturnValue> {
        if self.n_lines < 1 {
            return Err(args::below_minimum("n_lines", 1));
        }
        if self.line_offset == 0 {
            return Err(args::value_error(
                "line_offset cannot be 0; use 1 for the first line or -1 for the last line",
            ));
        }
        if self.line_offset < -(MAX_LINES as i64) {
            return Err(args::value_error(&format!(
                "line_offset cannot be less than -{MAX_LINES}. Use a positive line_offset with the total line count to read from a specific position."
            )));
        }
        Ok(())
    }
}

/// Reads text files for the model.
#[derive(Debug)]
pub struct ReadFile {
    spec: ToolSpec,
    env: Arc<Environment>,
    settings: FileSettings,
}

impl ReadFile {
    /// The tool, resolving relative paths against `env.work_dir`.
    pub fn new(env: Arc<Environment>, settings: FileSettings) -> Self {
        Self {
            spec: tool_spec::<ReadParams>("ReadFile", include_str!("descriptions/read.md")),
            env,
            settings,
        }
    }
}

impl Tool for ReadFile {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn plan(
        self: Arc<Self>,
        args: Value,
        _ctx: CallContext,
    ) -> BoxFuture<'static, Result<Plan, ToolReturnValue>> {
        Box::pin(async move {
            let params: ReadParams = parse_args(args)?;
            params.validate()?;
            let raw = params.path.clone();
            if raw.is_empty() {
                return Err(tool_error("File path cannot be empty.", "Empty file path"));
            }
            let named = resolve_tool_path(&raw, &self.env, "read")
                .map_err(|message| tool_error(message, "Invalid path"))?;
            let admitted = admit_read(&raw, named, &self.env, &self.settings, |shown| {
                format!("Read file `{shown}`")
            })
            .await?;
            let target = admitted.target.clone();
            Ok(admitted.plan(Box::pin(async move {
                let shown = raw.clone();
                blocking(move || read_file(&raw, &target, &params))
                    .await
                    .unwrap_or_else(|e| failed(&shown, &e))
            })))
        })
    }
}

fn failed(raw: &str, error: &str) -> ToolReturnValue {
    tracing::warn!(path = raw, error, "ReadFile failed");
    tool_error(
        format!("Failed to read {raw}. Error: {error}"),
        "Failed to read file",
    )
}

/// The read itself, on a blocking thread: the admitted file is opened once, without following
/// symlinks, and everything after (type, lines) comes from that open file.
fn read_file(raw: &str, target: &Target, params: &ReadParams) -> ToolReturnValue {
    let mut file = match open_checked(raw, target) {
        Ok(file) => file,
        Err(Checked::Refused(value)) => return value,
        Err(Checked::Io(e)) => return failed(raw, &e.to_string()),
    };
    if let Err(checked) = check_text_file(raw, &target.named, &mut file) {
        return match checked {
            Checked::Refused(value) => value,
            Checked::Io(e) => failed(raw, &e.to_string()),
        };
    }
    let reader = BufReader::with_capacity(64 << 10, file);
    let result = if params.line_offset < 0 {
        read_tail(
            reader,
            params.line_offset.unsigned_abs() as usize,
            params.n_lines as usize,
        )
    } else {
        read_forward(reader, params.line_offset as usize, params.n_lines as usize)
    };
    match result {
        Ok(window) => window.into_result(),
        Err(e) => failed(raw, &e.to_string()),
    }
}

/// Why a path cannot be read.
pub(crate) enum Checked {
    /// The reference's answer for this case.
    Refused(ToolReturnValue),
    /// The file system failed.
    Io(std::io::Error),
}

/// Opens the admitted file for reading, with the reference's messages (which quote the path as the
/// model wrote it) for a missing file and for something that is not a file.
pub(crate) fn open_checked(raw: &str, target: &Target) -> Result<std::fs::File, Checked> {
    match std::fs::metadata(&target.real) {
        Ok(meta) if !meta.is_file() => {
            return Err(Checked::Refused(tool_error(
                format!("`{raw}` is not a file."),
                "Invalid path",
            )));
        }
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(Checked::Refused(tool_error(
                format!("`{raw}` does not exist."),
                "File not found",
            )));
        }
        Err(e) => return Err(Checked::Io(e)),
    }
    open_real(&target.real, OpenFor::Read).map_err(Checked::Io)
}

/// The text-ness check, with the reference's messages. `named` gives the extension.
fn check_text_file(raw: &str, named: &Path, file: &mut std::fs::File) -> Result<(), Checked> {
    let header = read_header(file).map_err(Checked::Io)?;
    match detect_file_type(named, Some(&header)) {
        FileKind::Text => Ok(()),
        kind @ (FileKind::Image(_) | FileKind::Video(_)) => Err(Checked::Refused(tool_error(
            format!(
                "`{raw}` is a {} file. Use other appropriate tools to read image or video files.",
                kind.name()
            ),
            "Unsupported file type",
        ))),
        FileKind::Unknown => Err(Checked::Refused(tool_error(
            format!(
                "`{raw}` seems not readable. You may need to read it with proper shell commands, Python tools or MCP tools if available. If you read/operate it with Python, you MUST ensure that any third-party packages are installed in a virtual environment (venv)."
            ),
            "File not readable",
        ))),
    }
}

/// The first [`MEDIA_SNIFF_BYTES`] bytes of `file`, which is left at its start again.
pub(crate) fn read_header(file: &mut std::fs::File) -> std::io::Result<Vec<u8>> {
    let mut header = Vec::with_capacity(MEDIA_SNIFF_BYTES);
    file.by_ref()
        .take(MEDIA_SNIFF_BYTES as u64)
        .read_to_end(&mut header)?;
    file.seek(SeekFrom::Start(0))?;
    Ok(header)
}

/// Splits a byte stream into lines the way Python's text mode does (universal newlines): `\n`,
/// `\r\n` and a lone `\r` all end a line, and each kept line ends in `\n`. `on_line` gets each line
/// (without its break) and whether it had one; it returns `false` to stop receiving lines, after
/// which the rest of the stream is only counted. Returns the total number of lines.
fn split_stream<R: BufRead>(
    mut reader: R,
    mut on_line: impl FnMut(&[u8], bool) -> bool,
) -> std::io::Result<usize> {
    let mut segment = Vec::with_capacity(8 << 10);
    let mut total = 0usize;
    let mut collecting = true;
    loop {
        segment.clear();
        if reader.read_until(b'\n', &mut segment)? == 0 {
            return Ok(total);
        }
        let mut start = 0;
        let mut i = 0;
        while i < segment.len() {
            let end_of_line = match segment[i] {
                b'\r' if segment.get(i + 1) == Some(&b'\n') => Some(2),
                b'\r' | b'\n' => Some(1),
                _ => None,
            };
            if let Some(width) = end_of_line {
                total += 1;
                if collecting {
                    collecting = on_line(&segment[start..i], true);
                }
                i += width;
                start = i;
            } else {
                i += 1;
            }
        }
        if start < segment.len() {
            // Only possible at the end of the stream: a last line without a break.
            total += 1;
            if collecting {
                collecting = on_line(&segment[start..], false);
            }
        }
    }
}

/// One line as the model gets it: decoded, line break restored, cut if too long.
fn decode_line(bytes: &[u8], had_break: bool) -> (String, bool) {
    let mut line = String::from_utf8_lossy(bytes).into_owned();
    if had_break {
        line.push('\n');
    }
    let cut = truncate_line(&line, MAX_LINE_LENGTH, "...");
    let was_cut = cut.len() != line.len();
    (cut, was_cut)
}

/// Why reading stopped early.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    MaxLines,
    MaxBytes,
    None,
}

/// The lines read and what to say about them.
#[derive(Debug)]
struct Window {
    /// `(line number, text)` pairs, each text with its line break when it had one.
    lines: Vec<(usize, String)>,
    cut_lines: Vec<usize>,
    total: usize,
    stop: Stop,
    requested: usize,
}

impl Window {
    fn into_result(self) -> ToolReturnValue {
        let mut output = String::new();
        for (number, line) in &self.lines {
            output.push_str(&format!("{number:6}\t{line}"));
        }
        let mut message = match self.lines.first() {
            Some((start, _)) => {
                format!(
                    "{} lines read from file starting from line {start}.",
                    self.lines.len()
                )
            }
            None => "No lines read from file.".to_owned(),
        };
        message.push_str(&format!(" Total lines in file: {}.", self.total));
        match self.stop {
            Stop::MaxLines => message.push_str(&format!(" Max {MAX_LINES} lines reached.")),
            Stop::MaxBytes => message.push_str(&format!(" Max {MAX_BYTES} bytes reached.")),
            Stop::None if self.lines.len() < self.requested => message.push_str(" End of file reached."),
            Stop::None => {}
        }
        if !self.cut_lines.is_empty() {
            let list: Vec<String> = self.cut_lines.iter().map(ToString::to_string).collect();
            message.push_str(&format!(" Lines [{}] were truncated.", list.join(", ")));
        }
        ToolReturnValue::ok(output, message)
    }
}

/// Reads up to `n_lines` lines starting at line `offset` (1-based), counting every line of the file.
fn read_forward<R: BufRead>(reader: R, offset: usize, n_lines: usize) -> std::io::Result<Window> {
    let mut lines = Vec::new();
    let mut cut_lines = Vec::new();
    let mut n_bytes = 0usize;
    let mut stop = Stop::None;
    let mut number = 0usize;
    let total = split_stream(reader, |bytes, had_break| {
        number += 1;
        if number < offset {
            return true;
        }
        let (line, was_cut) = decode_line(bytes, had_break);
        if was_cut {
            cut_lines.push(number);
        }
        n_bytes += line.len();
        lines.push((number, line));
        if lines.len() >= n_lines {
            false
        } else if lines.len() >= MAX_LINES {
            stop = Stop::MaxLines;
            false
        } else if n_bytes >= MAX_BYTES {
            stop = Stop::MaxBytes;
            false
        } else {
            true
        }
    })?;
    Ok(Window {
        lines,
        cut_lines,
        total,
        stop,
        requested: n_lines,
    })
}

/// Reads the last `count` lines, then keeps the first `n_lines` of them, then (if they are too big)
/// the newest ones that fit in [`MAX_BYTES`].
fn read_tail<R: BufRead>(reader: R, count: usize, n_lines: usize) -> std::io::Result<Window> {
    let mut ring: VecDeque<(usize, String, bool)> = VecDeque::with_capacity(count.min(MAX_LINES));
    let mut number = 0usize;
    let total = split_stream(reader, |bytes, had_break| {
        number += 1;
        if ring.len() == count {
            ring.pop_front();
        }
        let (line, was_cut) = decode_line(bytes, had_break);
        ring.push_back((number, line, was_cut));
        true
    })?;
    let limit = n_lines.min(MAX_LINES);
    let all = ring.len();
    let mut candidates: Vec<(usize, String, bool)> = ring.into_iter().take(limit).collect();
    // Never true while the offset is at most MAX_LINES; kept for parity with the reference.
    let max_lines = all > MAX_LINES && candidates.len() == MAX_LINES;
    let size: usize = candidates.iter().map(|(_, line, _)| line.len()).sum();
    let mut stop = if max_lines { Stop::MaxLines } else { Stop::None };
    if size > MAX_BYTES {
        if stop == Stop::None {
            stop = Stop::MaxBytes;
        }
        let mut kept = 0;
        let mut bytes = 0;
        for (_, line, _) in candidates.iter().rev() {
            bytes += line.len();
            if bytes > MAX_BYTES {
                break;
            }
            kept += 1;
        }
        candidates.drain(..candidates.len() - kept);
    }
    let cut_lines = candidates
        .iter()
        .filter(|(_, _, cut)| *cut)
        .map(|(n, _, _)| *n)
        .collect();
    let lines = candidates.into_iter().map(|(n, line, _)| (n, line)).collect();
    Ok(Window {
        lines,
        cut_lines,
        total,
        stop,
        requested: n_lines,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::file::sensitive::SecretFiles;
    use crate::file::test_support::{TestDir, call, ok_text};
    use kimi_core::{ApprovalAsk, Effect};
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn tool(dir: &TestDir) -> Arc<ReadFile> {
        Arc::new(ReadFile::new(dir.env(), FileSettings::default()))
    }

    #[tokio::test]
    async fn reads_numbered_lines() {
        let dir = TestDir::new();
        dir.write("a.txt", "alpha\nbeta\r\ngamma\rdelta");
        let (effect, value) = call(tool(&dir), json!({"path": "a.txt"})).await;
        assert_eq!(effect, Some(Effect::ReadOnly));
        assert_eq!(
            value,
            ok_text(
                "     1\talpha\n     2\tbeta\n     3\tgamma\n     4\tdelta",
                "4 lines read from file starting from line 1. Total lines in file: 4. End of file reached."
            )
        );
    }

    #[tokio::test]
    async fn offset_and_count() {
        let dir = TestDir::new();
        let text: String = (1..=10).map(|i| format!("line {i}\n")).collect();
        dir.write("a.txt", &text);
        let (_, value) = call(
            tool(&dir),
            json!({"path": "a.txt", "line_offset": 3, "n_lines": 2}),
        )
        .await;
        assert_eq!(
            value,
            ok_text(
                "     3\tline 3\n     4\tline 4\n",
                "2 lines read from file starting from line 3. Total lines in file: 10."
            )
        );
        let (_, value) = call(tool(&dir), json!({"path": "a.txt", "line_offset": 20})).await;
        assert_eq!(
            value,
            ok_text(
                "",
                "No lines read from file. Total lines in file: 10. End of file reached."
            )
        );
    }

    #[tokio::test]
    async fn negative_offset_reads_the_tail() {
        let dir = TestDir::new();
        let text: String = (1..=10).map(|i| format!("l{i}\n")).collect();
        dir.write("a.txt", &text);
        let (_, value) = call(tool(&dir), json!({"path": "a.txt", "line_offset": -3})).await;
        assert_eq!(
            value,
            ok_text(
                "     8\tl8\n     9\tl9\n    10\tl10\n",
                "3 lines read from file starting from line 8. Total lines in file: 10. End of file reached."
            )
        );
        let (_, value) = call(
            tool(&dir),
            json!({"path": "a.txt", "line_offset": -5, "n_lines": 2}),
        )
        .await;
        assert_eq!(
            value,
            ok_text(
                "     6\tl6\n     7\tl7\n",
                "2 lines read from file starting from line 6. Total lines in file: 10."
            )
        );
        dir.write("empty.txt", "");
        let (_, value) = call(tool(&dir), json!({"path": "empty.txt", "line_offset": -3})).await;
        assert_eq!(
            value,
            ok_text(
                "",
                "No lines read from file. Total lines in file: 0. End of file reached."
            )
        );
    }

    #[tokio::test]
    async fn line_and_count_limits() {
        let dir = TestDir::new();
        let text: String = (1..=1500).map(|i| format!("{i}\n")).collect();
        dir.write("many.txt", &text);
        let (_, value) = call(tool(&dir), json!({"path": "many.txt", "n_lines": 5000})).await;
        assert_eq!(
            value.message,
            "1000 lines read from file starting from line 1. Total lines in file: 1500. Max 1000 lines reached."
        );
        let (_, value) = call(tool(&dir), json!({"path": "many.txt"})).await;
        assert_eq!(
            value.message,
            "1000 lines read from file starting from line 1. Total lines in file: 1500."
        );
    }

    #[tokio::test]
    async fn long_lines_and_byte_limit() {
        let dir = TestDir::new();
        let long = "x".repeat(3000);
        dir.write("long.txt", &format!("short\n{long}\n"));
        let (_, value) = call(tool(&dir), json!({"path": "long.txt"})).await;
        let expected = format!("     1\tshort\n     2\t{}...\n", "x".repeat(MAX_LINE_LENGTH - 4));
        assert_eq!(
            value,
            ok_text(
                &expected,
                "2 lines read from file starting from line 1. Total lines in file: 2. End of file reached. Lines [2] were truncated."
            )
        );
        // 60 lines of ~2000 bytes pass 100 KiB at line 52.
        let body: String = (0..60).map(|_| format!("{}\n", "y".repeat(1999))).collect();
        dir.write("big.txt", &body);
        let (_, value) = call(tool(&dir), json!({"path": "big.txt"})).await;
        assert_eq!(
            value.message,
            "52 lines read from file starting from line 1. Total lines in file: 60. Max 102400 bytes reached."
        );
        let (_, value) = call(tool(&dir), json!({"path": "big.txt", "line_offset": -60})).await;
        assert_eq!(
            value.message,
            "51 lines read from file starting from line 10. Total lines in file: 60. Max 102400 bytes reached."
        );
    }

    #[tokio::test]
    async fn invalid_arguments() {
        let dir = TestDir::new();
        for (args, message) in [
            (
                json!({"path": "a", "line_offset": 0}),
                "  Value error, line_offset cannot be 0; use 1 for the first line or -1 for the last line",
            ),
            (
                json!({"path": "a", "line_offset": -1001}),
                "  Value error, line_offset cannot be less than -1000. Use a positive line_offset with the total line count to read from a specific position.",
            ),
            (
                json!({"path": "a", "n_lines": 0, "line_offset": 0}),
                "n_lines\n  Input should be greater than or equal to 1",
            ),
        ] {
            let err = tool(&dir)
                .plan(args, crate::file::test_support::ctx())
                .await
                .err();
            assert_eq!(
                err,
                Some(ToolReturnValue::error(
                    "",
                    format!("Error validating JSON arguments: 1 validation error for Params\n{message}"),
                    "Invalid arguments"
                ))
            );
        }
    }

    #[tokio::test]
    async fn refusals() {
        let dir = TestDir::new();
        dir.write(".env", "SECRET=1");
        dir.write("pic.png", "not really");
        dir.write("blob.dat", "a\0b");
        dir.mkdir("sub");
        let cases = [
            ("", "File path cannot be empty.", "Empty file path"),
            (
                "../outside.txt",
                "`../outside.txt` is not an absolute path. You must provide an absolute path to read a file outside the working directory.",
                "Invalid path",
            ),
            (
                ".env",
                "`.env` appears to contain secrets (matched sensitive file pattern). Reading this file is blocked to protect credentials.",
                "Sensitive file",
            ),
            ("missing.txt", "`missing.txt` does not exist.", "File not found"),
            ("sub", "`sub` is not a file.", "Invalid path"),
            (
                "pic.png",
                "`pic.png` is a image file. Use other appropriate tools to read image or video files.",
                "Unsupported file type",
            ),
            (
                "blob.dat",
                "`blob.dat` seems not readable. You may need to read it with proper shell commands, Python tools or MCP tools if available. If you read/operate it with Python, you MUST ensure that any third-party packages are installed in a virtual environment (venv).",
                "File not readable",
            ),
        ];
        for (path, message, brief) in cases {
            let (_, value) = call(tool(&dir), json!({ "path": path })).await;
            assert_eq!(value, ToolReturnValue::error("", message, brief), "{path}");
        }
    }

    #[tokio::test]
    async fn reads_outside_the_workspace_ask_first() {
        let dir = TestDir::new();
        let other = tempfile::tempdir().unwrap();
        let file = other.path().canonicalize().unwrap().join("o.txt");
        std::fs::write(&file, "x\n").unwrap();
        let (effect, value) = call(tool(&dir), json!({ "path": file.to_string_lossy() })).await;
        assert_eq!(
            effect,
            Some(Effect::SideEffect(ApprovalAsk {
                action: "read file outside of working directory".into(),
                description: format!("Read file `{}`", file.display()),
                display: Vec::new(),
                detail_display: Vec::new(),
                writes: Vec::new(),
            }))
        );
        assert_eq!(
            value,
            ok_text(
                "     1\tx\n",
                "1 lines read from file starting from line 1. Total lines in file: 1. End of file reached."
            )
        );
        // The same file through a workspace symlink is judged where it points.
        std::os::unix::fs::symlink(&file, dir.path("notes.txt")).unwrap();
        let (effect, _) = call(tool(&dir), json!({ "path": "notes.txt" })).await;
        let Some(Effect::SideEffect(ask)) = effect else {
            panic!("expected a question, got {effect:?}")
        };
        assert_eq!(ask.description, format!("Read file `{}`", file.display()));
    }

    #[tokio::test]
    async fn secrets_are_refused_by_name_and_by_where_they_point() {
        let dir = TestDir::new();
        let other = tempfile::tempdir().unwrap();
        let key = other.path().join("id_rsa");
        std::fs::write(&key, "PRIVATE").unwrap();
        std::os::unix::fs::symlink(&key, dir.path("readme.md")).unwrap();
        let (effect, value) = call(tool(&dir), json!({ "path": "readme.md" })).await;
        assert_eq!(effect, None);
        assert_eq!(value.brief(), "Sensitive file");
        let secrets = SecretFiles::new(other.path(), None);
        std::fs::write(other.path().join("config.toml"), "api_key = 'k'").unwrap();
        let tool = Arc::new(ReadFile::new(
            dir.env(),
            FileSettings {
                read_roots: vec![other.path().to_path_buf()],
                secrets,
            },
        ));
        let config = other.path().join("config.toml");
        let (_, value) = call(tool, json!({ "path": config.to_string_lossy() })).await;
        assert_eq!(value.brief(), "Sensitive file");
    }

    #[tokio::test]
    async fn the_session_dir_and_read_roots_need_no_question() {
        let dir = TestDir::new();
        dir.write(".session/tool-outputs/tc.txt", "saved\n");
        let (effect, value) = call(
            tool(&dir),
            json!({ "path": dir.path(".session/tool-outputs/tc.txt").to_string_lossy() }),
        )
        .await;
        assert_eq!(effect, Some(Effect::ReadOnly));
        assert!(!value.is_error);
        let skills = tempfile::tempdir().unwrap();
        std::fs::write(skills.path().join("SKILL.md"), "skill\n").unwrap();
        let tool = Arc::new(ReadFile::new(
            dir.env(),
            FileSettings {
                read_roots: vec![skills.path().to_path_buf()],
                secrets: SecretFiles::default(),
            },
        ));
        let (effect, _) = call(
            tool,
            json!({ "path": skills.path().join("SKILL.md").to_string_lossy() }),
        )
        .await;
        assert_eq!(effect, Some(Effect::ReadOnly));
    }

    #[test]
    fn invalid_utf8_is_replaced() {
        let window = read_forward(&b"ok\n\xff\xfe bad\n"[..], 1, 10).unwrap();
        assert_eq!(window.lines[1].1, "\u{fffd}\u{fffd} bad\n");
        assert_eq!(window.total, 2);
    }
}
