//! The session title, and how clients that list sessions get to see it.
//!
//! Reference: the first turn that finishes, unless it was a slash command, titles a session that has
//! none with its text shortened to 50 characters (`custom_title` in `state.json`). The official
//! TypeScript SDK's `listSessions` does not read `state.json`: it shows `<session dir>/metadata.json`'s
//! `title`, else the text of the session's first `TurnBegin` in `wire.jsonl`. So the title is mirrored
//! to `metadata.json`, but only when that changes what the SDK shows: a session whose title is its
//! first prompt keeps exactly the reference's files (the reference's own suite checks the list). The
//! reference reads a `metadata.json` as a legacy file (its title becomes `custom_title` when that is
//! unset) and deletes it, so the mirror never disagrees with a session it opens.

use std::io::BufRead;
use std::path::Path;

use kimi_wire::message::{ContentPart, UserInput};
use serde_json::{Value, json};

use crate::session::{SessionError, write_atomic};
use crate::text::shorten;

/// The longest title, in characters (reference).
pub const TITLE_WIDTH: usize = 50;

/// The file the TypeScript SDK reads a session's title from.
pub const METADATA_FILE: &str = "metadata.json";

/// The title a finished turn on `input` gives a session that has none; `None` for a slash command
/// or an input without text.
pub fn from_prompt(input: &UserInput) -> Option<String> {
    // Reference: the text parts joined with spaces, then stripped.
    let text = match input {
        UserInput::Text(text) => text.clone(),
        UserInput::Parts(parts) => parts
            .iter()
            .filter_map(ContentPart::as_text)
            .collect::<Vec<_>>()
            .join(" "),
    };
    let text = text.trim();
    if crate::slash::parse(text).is_some() {
        return None;
    }
    let title = shorten(text, TITLE_WIDTH);
    (!title.is_empty()).then_some(title)
}

/// Makes `metadata.json` in `session_dir` show `title` when a reader falling back to the first prompt
/// recorded in `wire` would show something else, or when it already exists with another title.
pub fn publish(session_dir: &Path, wire: &Path, title: &str) -> Result<(), SessionError> {
    let path = session_dir.join(METADATA_FILE);
    let existing = std::fs::read(&path).ok().map(|bytes| {
        serde_json::from_slice::<Value>(&bytes)
            .ok()
            .and_then(|v| v.get("title").and_then(Value::as_str).map(str::to_owned))
    });
    let shown = first_prompt_text(wire);
    let needed = existing.is_some() || shown.as_deref() != Some(title);
    if !needed || existing.as_ref().is_some_and(|t| t.as_deref() == Some(title)) {
        return Ok(());
    }
    let body = serde_json::to_vec_pretty(&json!({ "title": title })).unwrap_or_default();
    write_atomic(&path, &body)
}

/// The first prompt's text as the SDK extracts it from `wire.jsonl` (a string as it is, the text
/// parts of a list joined by newlines; trimmed), or `None` without a readable first `TurnBegin`.
fn first_prompt_text(wire: &Path) -> Option<String> {
    let file = std::fs::File::open(wire).ok()?;
    for line in std::io::BufReader::new(file).lines() {
        let Ok(record) = serde_json::from_str::<Value>(&line.ok()?) else {
            continue;
        };
        if record.pointer("/message/type").and_then(Value::as_str) != Some("TurnBegin") {
            continue;
        }
        let text = match record.pointer("/message/payload/user_input")? {
            Value::String(text) => text.clone(),
            Value::Array(parts) => parts
                .iter()
                .filter(|p| p.get("type").and_then(Value::as_str) == Some("text"))
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n"),
            _ => return None,
        };
        return Some(text.trim().to_owned());
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn write_wire(dir: &Path, first_input: Value) -> std::path::PathBuf {
        let path = dir.join("wire.jsonl");
        let lines = [
            json!({"type": "metadata", "protocol_version": "1.10"}),
            json!({"timestamp": 1.0, "message": {"type": "TurnBegin", "payload": {"user_input": first_input}}}),
            json!({"timestamp": 2.0, "message": {"type": "TurnBegin", "payload": {"user_input": "later"}}}),
        ];
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        std::fs::write(&path, text).unwrap();
        path
    }

    fn metadata(dir: &Path) -> Option<Value> {
        let bytes = std::fs::read(dir.join(METADATA_FILE)).ok()?;
        Some(serde_json::from_slice(&bytes).unwrap())
    }

    #[test]
    fn prompts_give_the_reference_title() {
        assert_eq!(
            from_prompt(&UserInput::Text("  fix the\nbug ".into())),
            Some("fix the bug".into())
        );
        let parts = UserInput::Parts(vec![ContentPart::text("look at"), ContentPart::text("this")]);
        assert_eq!(from_prompt(&parts), Some("look at this".into()));
        let long = "please refactor the parser so that it handles nested quotes properly";
        assert_eq!(
            from_prompt(&UserInput::Text(long.into())),
            Some("please refactor the parser so that it handles\u{2026}".into())
        );
        assert_eq!(from_prompt(&UserInput::Text("/compact now".into())), None);
        assert_eq!(
            from_prompt(&UserInput::Text("/skill:review the code".into())),
            None
        );
        assert_eq!(from_prompt(&UserInput::Text("   ".into())), None);
    }

    #[test]
    fn metadata_is_written_only_when_it_changes_what_the_sdk_shows() {
        let dir = tempfile::tempdir().unwrap();
        let wire = write_wire(dir.path(), json!("hi"));
        publish(dir.path(), &wire, "hi").unwrap();
        assert_eq!(metadata(dir.path()), None, "the first prompt already says it");

        let wire = write_wire(dir.path(), json!("/yolo"));
        publish(dir.path(), &wire, "fix the bug").unwrap();
        assert_eq!(metadata(dir.path()), Some(json!({"title": "fix the bug"})));

        // Once there, it follows the title, even back to the first prompt's text.
        let wire = write_wire(
            dir.path(),
            json!([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]),
        );
        publish(dir.path(), &wire, "a\nb").unwrap();
        assert_eq!(metadata(dir.path()), Some(json!({"title": "a\nb"})));
    }

    #[test]
    fn a_session_without_a_first_prompt_gets_the_file() {
        let dir = tempfile::tempdir().unwrap();
        publish(dir.path(), &dir.path().join("wire.jsonl"), "titled").unwrap();
        assert_eq!(metadata(dir.path()), Some(json!({"title": "titled"})));
    }
}
