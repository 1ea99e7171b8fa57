//! The output budget: what the model gets of a tool result too long for its context.
//!
//! Every result goes through [`OutputBudget::apply`] after the tool ran. A result whose text holds more
//! than [`MODEL_OUTPUT_MAX_CHARS`] characters reaches the model as its head and its tail with a marker in
//! between, and the whole text is saved to a file in the session directory whose path the marker (and
//! the result's message) gives, so the model can read the middle with `ReadFile` or `Grep` when it needs
//! it. The client's `ToolResult` keeps the whole output: only the model's copy is cut.
//!
//! The reference cuts every built-in result to its first 50 000 characters inside the tool and loses the
//! rest (seeds/000 section 7); we keep the end too (where errors and summaries usually are) and lose
//! nothing. Lengths count Unicode scalar values, as the reference's `len` does.

use std::path::{Path, PathBuf};

use kimi_wire::message::{ContentPart, ToolOutput, ToolReturnValue};
use tokio::io::AsyncWriteExt;

use crate::tool_names::ToolNames;

/// Characters of text output the model receives at most (the reference's `DEFAULT_MAX_CHARS`).
pub const MODEL_OUTPUT_MAX_CHARS: usize = 50_000;

/// Room kept for the marker, so head + marker + tail stays within the budget.
const MARKER_RESERVE: usize = 2_000;

/// A cut end may move this fraction of its length to land on a line break instead of mid-line.
const SNAP_FRACTION: usize = 5;

/// Name of the folder of saved outputs inside the session directory.
pub const TOOL_OUTPUTS_DIR: &str = "tool-outputs";

/// Longest file-name stem taken from a tool call id.
const MAX_STEM_CHARS: usize = 96;

/// How many numbered names are tried when a saved output's name is taken.
const MAX_NAME_ATTEMPTS: u32 = 1_000;

/// Where and how much: the character cap and the folder for whole outputs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputBudget {
    max_chars: usize,
    dir: Option<PathBuf>,
    /// What the marker calls the reading and searching tools.
    names: ToolNames,
}

impl Default for OutputBudget {
    fn default() -> Self {
        Self::new(None)
    }
}

impl OutputBudget {
    /// The standard budget; whole outputs go to `dir` (usually `<session>/tool-outputs`). Without a
    /// folder, long outputs are still cut and the marker says the rest was not kept.
    pub fn new(dir: Option<PathBuf>) -> Self {
        Self::with_max_chars(MODEL_OUTPUT_MAX_CHARS, dir)
    }

    /// The budget of the session in `session_dir`: outputs saved to its [`TOOL_OUTPUTS_DIR`].
    pub fn for_session(session_dir: &Path) -> Self {
        Self::new(Some(session_dir.join(TOOL_OUTPUTS_DIR)))
    }

    /// A budget of `max_chars` (raised to leave room for the marker).
    pub fn with_max_chars(max_chars: usize, dir: Option<PathBuf>) -> Self {
        Self {
            max_chars: max_chars.max(2 * MARKER_RESERVE),
            dir,
            names: ToolNames::REFERENCE,
        }
    }

    /// The same budget, naming the tools in its marker as `names` says (the kimi-code agent's `Read`).
    #[must_use]
    pub fn with_tool_names(mut self, names: ToolNames) -> Self {
        self.names = names;
        self
    }

    /// The character cap.
    pub fn max_chars(&self) -> usize {
        self.max_chars
    }

    /// The folder whole outputs are saved in.
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// The model's copy of `value` when its text is over budget (whole text saved for call
    /// `tool_call_id`), or `None` when the model can have it as it is.
    pub async fn apply(&self, tool_call_id: &str, value: &ToolReturnValue) -> Option<ToolReturnValue> {
        let total = text_chars(&value.output);
        if total <= self.max_chars {
            return None;
        }
        let full = full_text(&value.output);
        let saved = match &self.dir {
            Some(dir) => match save(dir, tool_call_id, &full).await {
                Ok(path) => Some(path),
                Err(e) => {
                    tracing::warn!(dir = %dir.display(), error = %e, "could not save a long tool output");
                    None
                }
            },
            None => None,
        };
        let keep = (self.max_chars - MARKER_RESERVE) / 2;
        let cut = cut_middle(&full, keep, keep);
        let marker = self
            .names
            .apply(&marker(&cut, total, saved.as_deref()))
            .into_owned();
        let mut text = String::with_capacity(cut.head.len() + marker.len() + cut.tail.len());
        text.push_str(cut.head);
        text.push_str(&marker);
        text.push_str(cut.tail);

        let mut model = value.clone();
        model.output = replace_text(&value.output, text);
        let note = match &saved {
            Some(path) => format!(
                "Output is too long ({total} characters); the model sees its beginning and end, and the full \
                 output is saved at {}.",
                path.display()
            ),
            None => format!("Output is too long ({total} characters); the model sees its beginning and end."),
        };
        if model.message.is_empty() {
            model.message = note;
        } else {
            model.message.push(' ');
            model.message.push_str(&note);
        }
        Some(model)
    }
}

/// The head and tail kept of a long text, and what lies between them.
#[derive(Debug, PartialEq, Eq)]
struct Cut<'a> {
    head: &'a str,
    tail: &'a str,
    omitted_chars: usize,
    omitted_lines: usize,
}

/// Keeps about `head` characters from the start and `tail` from the end of `text`, moving each cut to a
/// line break when one is near. Assumes the text is longer than `head + tail`.
fn cut_middle(text: &str, head: usize, tail: usize) -> Cut<'_> {
    let head_end = byte_at_char(text, head);
    let head_end = match text[..head_end].rfind('\n') {
        Some(i) if head_end - i <= head_end / SNAP_FRACTION => i + 1,
        _ => head_end,
    };
    let total_chars = text.chars().count();
    let tail_start = byte_at_char(text, total_chars.saturating_sub(tail)).max(head_end);
    let tail_start = match text[tail_start..].find('\n') {
        Some(i) if i < (text.len() - tail_start) / SNAP_FRACTION => tail_start + i + 1,
        _ => tail_start,
    };
    let middle = &text[head_end..tail_start];
    Cut {
        head: &text[..head_end],
        tail: &text[tail_start..],
        omitted_chars: middle.chars().count(),
        omitted_lines: middle.matches('\n').count(),
    }
}

/// The byte offset of the `n`th character (the length when there are fewer).
fn byte_at_char(text: &str, n: usize) -> usize {
    text.char_indices().nth(n).map_or(text.len(), |(i, _)| i)
}

/// The text the model finds where the middle was.
fn marker(cut: &Cut<'_>, total: usize, saved: Option<&Path>) -> String {
    let kept = match saved {
        Some(path) => format!(
            "The full output ({total} characters) is saved at {}; read the omitted part with ReadFile \
             (line_offset, n_lines) or search it with Grep.",
            path.display()
        ),
        None => format!("The full output ({total} characters) could not be saved."),
    };
    let newline = if cut.head.ends_with('\n') || cut.head.is_empty() {
        ""
    } else {
        "\n"
    };
    format!(
        "{newline}\n[... {} characters ({} lines) omitted here. {kept} ...]\n\n",
        cut.omitted_chars, cut.omitted_lines
    )
}

fn text_chars(output: &ToolOutput) -> usize {
    match output {
        ToolOutput::Text(text) => text.chars().count(),
        ToolOutput::Parts(parts) => parts
            .iter()
            .filter_map(ContentPart::as_text)
            .map(|t| t.chars().count())
            .sum(),
    }
}

fn full_text(output: &ToolOutput) -> String {
    match output {
        ToolOutput::Text(text) => text.clone(),
        ToolOutput::Parts(parts) => parts.iter().filter_map(ContentPart::as_text).collect(),
    }
}

/// `output` with its text replaced by `text`: for parts, the first text part carries it, the other text
/// parts go, and non-text parts stay where they were.
fn replace_text(output: &ToolOutput, text: String) -> ToolOutput {
    match output {
        ToolOutput::Text(_) => ToolOutput::Text(text),
        ToolOutput::Parts(parts) => {
            let mut text = Some(text);
            let parts = parts
                .iter()
                .filter_map(|part| match part {
                    ContentPart::Text(_) => text.take().map(ContentPart::text),
                    other => Some(other.clone()),
                })
                .collect();
            ToolOutput::Parts(parts)
        }
    }
}

/// Writes `text` to a new file in `dir` named after the call, never overwriting an earlier output (ids
/// repeat across turns and sessions of scripted clients).
async fn save(dir: &Path, tool_call_id: &str, text: &str) -> std::io::Result<PathBuf> {
    crate::private_files::create_dir_all(dir)?;
    let stem = file_stem(tool_call_id);
    for attempt in 1..=MAX_NAME_ATTEMPTS {
        let name = if attempt == 1 {
            format!("{stem}.txt")
        } else {
            format!("{stem}-{attempt}.txt")
        };
        let path = dir.join(name);
        match tokio::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(crate::private_files::FILE_MODE)
            .open(&path)
            .await
        {
            Ok(mut file) => {
                file.write_all(text.as_bytes()).await?;
                file.flush().await?;
                return Ok(path);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
    }
    Err(std::io::Error::other("no free file name for the saved output"))
}

/// A safe file-name stem from a tool call id: ASCII letters, digits, `-` and `_` kept, anything else
/// (path separators, dots) replaced by `_`.
fn file_stem(tool_call_id: &str) -> String {
    let stem: String = tool_call_id
        .chars()
        .take(MAX_STEM_CHARS)
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if stem.is_empty() { "call".to_owned() } else { stem }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kimi_wire::message::{ImageUrlPart, MediaUrl};
    use pretty_assertions::assert_eq;

    fn lines(n: usize, width: usize) -> String {
        (0..n).map(|i| format!("{i:0width$}\n")).collect()
    }

    #[tokio::test]
    async fn short_output_is_left_alone() {
        let budget = OutputBudget::new(None);
        let value = ToolReturnValue::ok("x".repeat(MODEL_OUTPUT_MAX_CHARS), "ok");
        assert_eq!(budget.apply("tc-1", &value).await, None);
    }

    #[tokio::test]
    async fn long_output_keeps_head_and_tail_and_saves_the_whole() {
        let dir = tempfile::tempdir().unwrap();
        let budget = OutputBudget::for_session(dir.path());
        let text = lines(10_000, 9); // 100 000 characters
        let value = ToolReturnValue::ok(text.clone(), "Command executed successfully.");
        let model = budget.apply("tc/../1", &value).await.unwrap();

        let saved = dir.path().join("tool-outputs/tc____1.txt");
        assert_eq!(std::fs::read_to_string(&saved).unwrap(), text);
        let ToolOutput::Text(cut) = &model.output else {
            panic!("text expected")
        };
        assert!(cut.chars().count() <= MODEL_OUTPUT_MAX_CHARS, "{}", cut.len());
        assert!(cut.starts_with("000000000\n000000001\n"));
        assert!(cut.ends_with("000009999\n"));
        assert!(cut.contains(&format!("is saved at {}", saved.display())), "{cut}");
        assert!(cut.contains("characters (") && cut.contains("lines) omitted here"));
        // Cut at line breaks: every kept line is whole.
        for line in cut.lines().filter(|l| !l.is_empty() && !l.starts_with("[...")) {
            assert_eq!(line.len(), 9, "{line:?}");
        }
        assert_eq!(
            model.message,
            format!(
                "Command executed successfully. Output is too long (100000 characters); the model sees its \
                 beginning and end, and the full output is saved at {}.",
                saved.display()
            )
        );
        // The client's copy is untouched; is_error and display carry over.
        assert_eq!(model.is_error, value.is_error);
        assert_eq!(model.display, value.display);
    }

    #[tokio::test]
    async fn repeated_ids_do_not_overwrite_earlier_outputs() {
        let dir = tempfile::tempdir().unwrap();
        let budget = OutputBudget::with_max_chars(4_000, Some(dir.path().to_owned()));
        let first = ToolReturnValue::ok("a".repeat(10_000), "");
        let second = ToolReturnValue::ok("b".repeat(10_000), "");
        budget.apply("tc-1", &first).await.unwrap();
        budget.apply("tc-1", &second).await.unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.path().join("tc-1.txt")).unwrap(),
            "a".repeat(10_000)
        );
        assert_eq!(
            std::fs::read_to_string(dir.path().join("tc-1-2.txt")).unwrap(),
            "b".repeat(10_000)
        );
    }

    #[tokio::test]
    async fn without_a_folder_the_marker_says_so() {
        let budget = OutputBudget::with_max_chars(4_000, None);
        let value = ToolReturnValue::error("é".repeat(10_000), "Command failed with exit code: 1.", "x");
        let model = budget.apply("tc-1", &value).await.unwrap();
        let ToolOutput::Text(cut) = &model.output else {
            panic!("text expected")
        };
        assert!(cut.contains("(10000 characters) could not be saved"), "{cut}");
        assert!(model.is_error);
        assert!(
            model
                .message
                .starts_with("Command failed with exit code: 1. Output is too long")
        );
    }

    #[tokio::test]
    async fn parts_keep_media_and_merge_text() {
        let budget = OutputBudget::with_max_chars(4_000, None);
        let image = ContentPart::ImageUrl(ImageUrlPart {
            image_url: MediaUrl {
                url: "data:image/png;base64,AAAA".into(),
                id: None,
            },
        });
        let value = ToolReturnValue::ok(
            ToolOutput::Parts(vec![
                ContentPart::text("x".repeat(3_000)),
                image.clone(),
                ContentPart::text("y".repeat(3_000)),
            ]),
            "",
        );
        let model = budget.apply("tc-1", &value).await.unwrap();
        let ToolOutput::Parts(parts) = &model.output else {
            panic!("parts expected")
        };
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[1], image);
        let text = parts[0].as_text().unwrap();
        assert!(text.starts_with('x') && text.ends_with('y'));
    }

    #[test]
    fn cut_middle_counts_what_it_drops() {
        let text = lines(100, 9);
        let cut = cut_middle(&text, 95, 95);
        // 95 characters end mid-line; both cuts move back to the nearest line break.
        assert_eq!(cut.head, lines(9, 9));
        assert_eq!(cut.tail, &text[910..]);
        assert_eq!(cut.omitted_lines, 82);
        assert_eq!(cut.omitted_chars, 820);
        // No line break near the cut: cut mid-line.
        let flat = "z".repeat(1_000);
        let cut = cut_middle(&flat, 100, 100);
        assert_eq!(
            (cut.head.len(), cut.tail.len(), cut.omitted_chars),
            (100, 100, 800)
        );
    }

    #[test]
    fn file_stems_are_safe() {
        assert_eq!(file_stem("call_0-ab"), "call_0-ab");
        assert_eq!(file_stem("../x/y.z"), "___x_y_z");
        assert_eq!(file_stem(""), "call");
        assert_eq!(file_stem(&"a".repeat(500)).len(), MAX_STEM_CHARS);
    }
}
