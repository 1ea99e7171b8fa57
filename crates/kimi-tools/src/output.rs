//! The output budget every built-in tool writes through: a character cap for the whole result, a length
//! cap per line, and the note the model gets when something was cut.
//!
//! This mirrors the reference's `ToolResultBuilder` (`kimi_cli/tools/utils.py`) rule for rule, because
//! the model and the clients see its exact output: lengths count Unicode scalar values (Python `len`),
//! lines are split the way Python's `str.splitlines(keepends=True)` splits them, a cut line ends in
//! [`TRUNCATION_MARKER`] followed by its original line break, and once the budget is spent later writes
//! are dropped. [`OutputBuilder::ok`] and [`OutputBuilder::error`] add [`TRUNCATION_MESSAGE`] to the
//! message when anything was cut.

use kimi_wire::message::{DisplayBlock, ToolOutput, ToolReturnValue};
use serde_json::{Map, Value};

/// Characters a tool result may hold (reference `DEFAULT_MAX_CHARS`).
pub const DEFAULT_MAX_CHARS: usize = 50_000;

/// Characters one line may hold, marker included (reference `DEFAULT_MAX_LINE_LENGTH`).
pub const DEFAULT_MAX_LINE_LENGTH: usize = 2000;

/// What replaces the cut end of a line.
pub const TRUNCATION_MARKER: &str = "[...truncated]";

/// Added to the result's message when any output was cut.
pub const TRUNCATION_MESSAGE: &str = "Output is truncated to fit in the message.";

/// Collects a tool's text output under the reference's limits and turns it into a [`ToolReturnValue`].
///
/// ```
/// use kimi_tools::output::OutputBuilder;
///
/// let mut out = OutputBuilder::new();
/// out.write("hello\n");
/// let value = out.ok("Done", "");
/// assert_eq!(value.message, "Done.");
/// ```
#[derive(Debug, Clone)]
pub struct OutputBuilder {
    max_chars: usize,
    max_line_length: Option<usize>,
    /// One entry per written line, line break included, as the reference keeps them (`tail` walks them).
    pieces: Vec<String>,
    n_chars: usize,
    n_lines: usize,
    truncated: bool,
    display: Vec<DisplayBlock>,
    extras: Option<Map<String, Value>>,
}

impl Default for OutputBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl OutputBuilder {
    /// A builder with the default limits ([`DEFAULT_MAX_CHARS`], [`DEFAULT_MAX_LINE_LENGTH`]).
    pub fn new() -> Self {
        Self::with_limits(DEFAULT_MAX_CHARS, Some(DEFAULT_MAX_LINE_LENGTH))
    }

    /// A builder with other limits; `None` leaves lines uncut (only the total is capped). A line limit
    /// shorter than the marker is raised to just above it, since a cut line must fit the marker.
    pub fn with_limits(max_chars: usize, max_line_length: Option<usize>) -> Self {
        let marker_len = TRUNCATION_MARKER.chars().count();
        Self {
            max_chars,
            max_line_length: max_line_length.map(|n| n.max(marker_len + 1)),
            pieces: Vec::new(),
            n_chars: 0,
            n_lines: 0,
            truncated: false,
            display: Vec::new(),
            extras: None,
        }
    }

    /// Whether the character budget is spent; later writes are dropped.
    pub fn is_full(&self) -> bool {
        self.n_chars >= self.max_chars
    }

    /// Characters written so far (markers included).
    pub fn n_chars(&self) -> usize {
        self.n_chars
    }

    /// Complete lines (ending in `\n`) written so far.
    pub fn n_lines(&self) -> usize {
        self.n_lines
    }

    /// Whether anything was cut so far.
    pub fn is_truncated(&self) -> bool {
        self.truncated
    }

    /// The output collected so far.
    pub fn text(&self) -> String {
        self.pieces.concat()
    }

    /// Appends `text`, cutting lines that are too long and stopping when the budget is spent. Returns
    /// the number of characters kept.
    pub fn write(&mut self, text: &str) -> usize {
        if self.is_full() {
            return 0;
        }
        let mut written = 0;
        for line in split_lines(text, true) {
            if self.is_full() {
                break;
            }
            let remaining = self.max_chars - self.n_chars;
            let limit = match self.max_line_length {
                Some(max) => remaining.min(max),
                None => remaining,
            };
            let kept = truncate_line(line, limit, TRUNCATION_MARKER);
            if kept.len() != line.len() {
                self.truncated = true;
            }
            let n = kept.chars().count();
            written += n;
            self.n_chars += n;
            if kept.ends_with('\n') {
                self.n_lines += 1;
            }
            self.pieces.push(kept);
        }
        written
    }

    /// The last `max_lines` non-blank lines, each cut to `max_line_len` characters (plus `...`), joined
    /// with newlines: enough of the end of the output to explain a failure in a brief.
    pub fn tail(&self, max_lines: usize, max_line_len: usize) -> String {
        let mut collected: Vec<String> = Vec::new();
        'pieces: for piece in self.pieces.iter().rev() {
            for line in split_lines(piece, false).into_iter().rev() {
                let stripped = line.trim_end_matches(is_py_space);
                if stripped.trim_start_matches(is_py_space).is_empty() {
                    continue;
                }
                let mut kept: String = stripped.chars().take(max_line_len).collect();
                if stripped.chars().nth(max_line_len).is_some() {
                    kept.push_str("...");
                }
                collected.push(kept);
                if collected.len() >= max_lines {
                    break 'pieces;
                }
            }
        }
        collected.reverse();
        collected.join("\n")
    }

    /// Adds a display block, shown after the brief.
    pub fn display(&mut self, block: DisplayBlock) {
        self.display.push(block);
    }

    /// Adds an extra value to the result's `extras`.
    pub fn extra(&mut self, key: impl Into<String>, value: Value) {
        self.extras.get_or_insert_with(Map::new).insert(key.into(), value);
    }

    /// A successful result. A non-empty `message` gets a final period if it lacks one; an empty
    /// `brief` adds no brief block.
    pub fn ok(self, message: &str, brief: &str) -> ToolReturnValue {
        let mut message = message.to_owned();
        if !message.is_empty() && !message.ends_with('.') {
            message.push('.');
        }
        self.finish(false, message, brief)
    }

    /// A failed result. Unlike [`OutputBuilder::ok`], the message is kept as given (no period added).
    pub fn error(self, message: &str, brief: &str) -> ToolReturnValue {
        self.finish(true, message.to_owned(), brief)
    }

    fn finish(self, is_error: bool, mut message: String, brief: &str) -> ToolReturnValue {
        if self.truncated {
            if message.is_empty() {
                message = TRUNCATION_MESSAGE.to_owned();
            } else {
                message.push(' ');
                message.push_str(TRUNCATION_MESSAGE);
            }
        }
        let mut display = Vec::with_capacity(self.display.len() + 1);
        if !brief.is_empty() {
            display.push(DisplayBlock::Brief {
                text: brief.to_owned(),
            });
        }
        display.extend(self.display);
        ToolReturnValue {
            is_error,
            output: ToolOutput::Text(self.pieces.concat()),
            message,
            display,
            extras: self.extras,
        }
    }
}

/// Cuts `line` to at most `max_length` characters, ending it with `marker` and keeping its trailing
/// `\r`/`\n` run. When even the marker and line break do not fit, the result is just those, so it may be
/// longer than `max_length`.
pub fn truncate_line(line: &str, max_length: usize, marker: &str) -> String {
    let len = line.chars().count();
    if len <= max_length {
        return line.to_owned();
    }
    let body = line.trim_end_matches(['\r', '\n']);
    let linebreak = &line[body.len()..];
    let end_len = marker.chars().count() + linebreak.chars().count();
    let keep = max_length.max(end_len) - end_len;
    let mut out: String = line.chars().take(keep).collect();
    out.push_str(marker);
    out.push_str(linebreak);
    out
}

/// Splits like Python's `str.splitlines`: on `\n`, `\r`, `\r\n`, `\v`, `\f`, `\x1c`-`\x1e`, `\u{85}`,
/// `\u{2028}` and `\u{2029}`, keeping the breaks when `keep_ends` is set. An empty string gives no lines.
pub fn split_lines(text: &str, keep_ends: bool) -> Vec<&str> {
    let mut lines = Vec::new();
    let mut start = 0;
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let break_end = match c {
            '\r' => match chars.peek() {
                Some(&(j, '\n')) => {
                    chars.next();
                    j + 1
                }
                _ => i + 1,
            },
            '\n' | '\u{0b}' | '\u{0c}' | '\u{1c}' | '\u{1d}' | '\u{1e}' | '\u{85}' | '\u{2028}'
            | '\u{2029}' => i + c.len_utf8(),
            _ => continue,
        };
        lines.push(if keep_ends {
            &text[start..break_end]
        } else {
            &text[start..i]
        });
        start = break_end;
    }
    if start < text.len() {
        lines.push(&text[start..]);
    }
    lines
}

/// Python's `str.isspace` for one character: Unicode whitespace plus the ASCII separators `\x1c`-`\x1f`.
fn is_py_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn split_lines_matches_python() {
        assert_eq!(split_lines("", true), Vec::<&str>::new());
        assert_eq!(split_lines("a\nb", true), vec!["a\n", "b"]);
        assert_eq!(
            split_lines("a\r\nb\rc\u{2028}d\n", true),
            vec!["a\r\n", "b\r", "c\u{2028}", "d\n"]
        );
        assert_eq!(
            split_lines("a\r\nb\rc\u{2028}d\n", false),
            vec!["a", "b", "c", "d"]
        );
        assert_eq!(split_lines("\n\n", false), vec!["", ""]);
    }

    #[test]
    fn truncate_line_keeps_the_line_break() {
        assert_eq!(truncate_line("short\n", 10, "..."), "short\n");
        assert_eq!(truncate_line("abcdefghij\n", 8, "..."), "abcd...\n");
        assert_eq!(truncate_line("abcdefghij\r\n", 8, "..."), "abc...\r\n");
        // Too short for the marker: the marker and break are kept whole.
        assert_eq!(truncate_line("abcdefghij\n", 2, "..."), "...\n");
        // Characters, not bytes.
        assert_eq!(truncate_line("ééééé", 4, "."), "ééé.");
    }

    #[test]
    fn ok_adds_a_period_and_no_brief_when_empty() {
        let mut out = OutputBuilder::new();
        assert_eq!(out.write("ok\n"), 3);
        let value = out.ok("Command executed successfully", "");
        assert_eq!(
            value,
            ToolReturnValue::ok("ok\n", "Command executed successfully.")
        );
    }

    #[test]
    fn error_keeps_the_message_and_puts_the_brief_first() {
        let mut out = OutputBuilder::new();
        out.write("boom\n");
        out.display(DisplayBlock::Brief {
            text: "second".into(),
        });
        let value = out.error("Failed", "first");
        assert!(value.is_error);
        assert_eq!(value.message, "Failed");
        assert_eq!(
            value.display,
            vec![
                DisplayBlock::Brief { text: "first".into() },
                DisplayBlock::Brief {
                    text: "second".into()
                }
            ]
        );
    }

    #[test]
    fn long_lines_are_cut_and_reported() {
        let mut out = OutputBuilder::new();
        let line = format!("{}\n", "x".repeat(3000));
        out.write(&line);
        assert!(out.is_truncated());
        let text = out.text();
        assert_eq!(text.chars().count(), DEFAULT_MAX_LINE_LENGTH);
        assert!(text.ends_with("x[...truncated]\n"));
        assert_eq!(out.n_lines(), 1);
        let value = out.ok("", "");
        assert_eq!(value.message, TRUNCATION_MESSAGE);
    }

    #[test]
    fn the_total_budget_stops_writes() {
        let mut out = OutputBuilder::with_limits(100, Some(50));
        for _ in 0..10 {
            out.write(&format!("{}\n", "y".repeat(29)));
        }
        // Three lines of 30 fit (90); the fourth has 10 characters left, too few for the marker and
        // break, so it becomes just those (15) and the total overshoots, as in the reference.
        assert!(out.is_full());
        assert_eq!(out.n_chars(), 105);
        assert_eq!(out.n_lines(), 4);
        assert!(out.text().ends_with("y\n[...truncated]\n"));
        assert_eq!(out.write("more\n"), 0);
        let value = out.error("Command failed with exit code: 1.", "x");
        assert_eq!(
            value.message,
            "Command failed with exit code: 1. Output is truncated to fit in the message."
        );
    }

    #[test]
    fn tail_takes_the_last_non_blank_lines() {
        let mut out = OutputBuilder::new();
        out.write("one\ntwo\n\n   \nthree   \n");
        out.write(&format!("{}\n", "z".repeat(300)));
        assert_eq!(out.tail(3, 200), format!("two\nthree\n{}...", "z".repeat(200)));
        assert_eq!(OutputBuilder::new().tail(5, 200), "");
    }
}
