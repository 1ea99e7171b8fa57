//! `StrReplaceFile`: exact string replacements in a text file, after approval.
//!
//! Reference: `kimi_cli/tools/file/replace.py`. Edits apply in order, each to the result of the one
//! before; without `replace_all` only the first occurrence changes. If the file ends up unchanged the
//! call fails. Planning computes the new text so the approval request shows the diff; running reads
//! the file again and re-applies the edits, so a change made meanwhile is not overwritten.
//!
//! The file is read as the reference reads it (invalid UTF-8 replaced, `\r\n` seen as `\n`). Unlike
//! the reference, which then writes every line ending back as `\n`, a file whose lines all end in
//! `\r\n` keeps them.

use std::path::PathBuf;
use std::sync::Arc;

use futures::future::BoxFuture;
use kimi_core::state::Environment;
use kimi_core::toolset::{ApprovalAsk, CallContext, Plan, Tool, parse_args};
use kimi_llm::ToolSpec;
use kimi_wire::message::{DisplayBlock, ToolReturnValue};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::diff::build_diff_blocks;
use super::paths::{is_within_workspace, resolve_tool_path};
use super::{ACTION_EDIT, ACTION_EDIT_OUTSIDE, blocking, check_sandbox, decode_text, tool_error, tool_spec};

// One replacement (field doc comments are the parameter descriptions).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
struct Edit {
    /// The exact text to find; it may span several lines.
    old: String,
    /// The text to put in its place; it may span several lines.
    new: String,
    /// Replace every occurrence instead of only the first.
    #[serde(default)]
    replace_all: bool,
}

// One edit or several.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(untagged)]
enum Edits {
    One(Edit),
    Many(Vec<Edit>),
}

impl Edits {
    fn as_slice(&self) -> &[Edit] {
        match self {
            Self::One(edit) => std::slice::from_ref(edit),
            Self::Many(edits) => edits,
        }
    }
}

// Arguments of `StrReplaceFile` (field doc comments are the parameter descriptions).
#[derive(Debug, Deserialize, JsonSchema)]
struct EditParams {
    /// File to edit. Relative paths start at the working directory; files outside it need an absolute path.
    path: String,
    /// A single edit, or a list of edits applied one after another.
    edit: Edits,
}

/// Edits text files by exact replacement.
#[derive(Debug)]
pub struct StrReplaceFile {
    spec: ToolSpec,
    env: Arc<Environment>,
}

impl StrReplaceFile {
    /// The tool, resolving relative paths against `env.work_dir`.
    pub fn new(env: Arc<Environment>) -> Self {
        Self {
            spec: tool_spec::<EditParams>("StrReplaceFile", include_str!("descriptions/edit.md")),
            env,
        }
    }
}

impl Tool for StrReplaceFile {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn plan(
        self: Arc<Self>,
        args: Value,
        ctx: CallContext,
    ) -> BoxFuture<'static, Result<Plan, ToolReturnValue>> {
        Box::pin(async move {
            let params: EditParams = parse_args(args)?;
            let (path, action, diff) = prepare(&self.env, &params).await?;
            check_sandbox(&self.env, &path, ctx.plan_mode)?;
            let ask = ApprovalAsk {
                action: action.to_owned(),
                description: format!("Edit file `{}`", path.display()),
                display: diff.clone(),
                writes: vec![path.clone()],
            };
            let run = async move {
                if let Err(refusal) = check_sandbox(&self.env, &path, ctx.plan_mode) {
                    return refusal;
                }
                run(params, path, diff).await
            };
            Ok(Plan::side_effect(ask, Box::pin(run)))
        })
    }
}

/// The file's text and whether to write it back with `\r\n` line endings.
struct Loaded {
    text: String,
    crlf: bool,
}

async fn load(path: &std::path::Path) -> std::io::Result<Loaded> {
    let bytes = tokio::fs::read(path).await?;
    Ok(Loaded {
        crlf: all_crlf(&bytes),
        text: decode_text(&bytes),
    })
}

/// Whether every line break in `bytes` is `\r\n` (and there is at least one).
fn all_crlf(bytes: &[u8]) -> bool {
    let mut seen = false;
    for (i, &b) in bytes.iter().enumerate() {
        match b {
            b'\n' if i == 0 || bytes[i - 1] != b'\r' => return false,
            b'\n' => seen = true,
            b'\r' if bytes.get(i + 1) != Some(&b'\n') => return false,
            _ => {}
        }
    }
    seen
}

/// Applies `edits` in order.
fn apply(content: &str, edits: &[Edit]) -> String {
    let mut text = content.to_owned();
    for edit in edits {
        text = if edit.replace_all {
            text.replace(&edit.old, &edit.new)
        } else {
            text.replacen(&edit.old, &edit.new, 1)
        };
    }
    text
}

/// Replacements counted the reference's way: against the original text, all occurrences for
/// `replace_all`, otherwise one if the old text occurs at all.
fn count_replacements(original: &str, edits: &[Edit]) -> usize {
    edits
        .iter()
        .map(|edit| {
            if edit.replace_all {
                original.matches(edit.old.as_str()).count()
            } else {
                usize::from(original.contains(edit.old.as_str()))
            }
        })
        .sum()
}

fn no_replacements() -> ToolReturnValue {
    tool_error(
        "No replacements were made. The old string was not found in the file.",
        "No replacements made",
    )
}

fn failed(raw: &str, error: &str) -> ToolReturnValue {
    tracing::warn!(path = raw, error, "StrReplaceFile failed");
    tool_error(format!("Failed to edit. Error: {error}"), "Failed to edit file")
}

async fn prepare(
    env: &Environment,
    params: &EditParams,
) -> Result<(PathBuf, &'static str, Vec<DisplayBlock>), ToolReturnValue> {
    let raw = params.path.as_str();
    if raw.is_empty() {
        return Err(tool_error("File path cannot be empty.", "Empty file path"));
    }
    let path = resolve_tool_path(raw, env, "edit").map_err(|message| tool_error(message, "Invalid path"))?;
    match tokio::fs::metadata(&path).await {
        Ok(meta) if meta.is_file() => {}
        Ok(_) => return Err(tool_error(format!("`{raw}` is not a file."), "Invalid path")),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(tool_error(format!("`{raw}` does not exist."), "File not found"));
        }
        Err(e) => return Err(failed(raw, &e.to_string())),
    }
    let loaded = load(&path).await.map_err(|e| failed(raw, &e.to_string()))?;
    let edits = params.edit.as_slice().to_vec();
    let shown = path.to_string_lossy().into_owned();
    let diff = blocking(move || {
        let new_text = apply(&loaded.text, &edits);
        (new_text != loaded.text).then(|| build_diff_blocks(&shown, &loaded.text, &new_text))
    })
    .await
    .map_err(|e| failed(raw, &e))?
    .ok_or_else(no_replacements)?;
    let action = if is_within_workspace(&path, env) {
        ACTION_EDIT
    } else {
        ACTION_EDIT_OUTSIDE
    };
    Ok((path, action, diff))
}

async fn run(params: EditParams, path: PathBuf, diff: Vec<DisplayBlock>) -> ToolReturnValue {
    let raw = params.path.as_str();
    let edits = params.edit.as_slice();
    // Re-read: the file may have changed while the user was deciding.
    let loaded = match load(&path).await {
        Ok(loaded) => loaded,
        Err(e) => return failed(raw, &e.to_string()),
    };
    let new_text = apply(&loaded.text, edits);
    if new_text == loaded.text {
        return no_replacements();
    }
    let bytes = if loaded.crlf {
        new_text.replace('\n', "\r\n")
    } else {
        new_text
    };
    if let Err(e) = tokio::fs::write(&path, bytes.as_bytes()).await {
        return failed(raw, &e.to_string());
    }
    let total = count_replacements(&loaded.text, edits);
    ToolReturnValue {
        display: diff,
        ..ToolReturnValue::ok(
            "",
            format!(
                "File successfully edited. Applied {} edit(s) with {total} total replacement(s).",
                edits.len()
            ),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::file::test_support::{TestDir, call, ctx};
    use kimi_core::toolset::Effect;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn tool(dir: &TestDir) -> Arc<StrReplaceFile> {
        Arc::new(StrReplaceFile::new(dir.env()))
    }

    fn diff(path: &str, old_text: &str, new_text: &str, start: u32) -> DisplayBlock {
        DisplayBlock::Diff {
            path: path.into(),
            old_text: old_text.into(),
            new_text: new_text.into(),
            old_start: start,
            new_start: start,
            is_summary: false,
        }
    }

    #[tokio::test]
    async fn single_edit_asks_with_the_diff_then_writes() {
        let dir = TestDir::new();
        dir.write("file.txt", "hello");
        let (effect, value) = call(
            tool(&dir),
            json!({"path": "file.txt", "edit": {"old": "hello", "new": "hi", "replace_all": false}}),
        )
        .await;
        let shown = dir.show("file.txt");
        let blocks = vec![diff(&shown, "hello", "hi", 1)];
        assert_eq!(
            effect,
            Some(Effect::SideEffect(ApprovalAsk {
                action: "edit file".into(),
                description: format!("Edit file `{shown}`"),
                display: blocks.clone(),
                writes: vec![dir.path("file.txt")],
            }))
        );
        assert_eq!(
            value,
            ToolReturnValue {
                display: blocks,
                ..ToolReturnValue::ok(
                    "",
                    "File successfully edited. Applied 1 edit(s) with 1 total replacement(s)."
                )
            }
        );
        assert_eq!(dir.read("file.txt"), "hi");
    }

    #[tokio::test]
    async fn several_edits_in_order_and_replace_all() {
        let dir = TestDir::new();
        dir.write("a.py", "x = 1\ny = x\nz = x\n");
        let args = json!({"path": "a.py", "edit": [
            {"old": "x", "new": "w", "replace_all": true},
            {"old": "y", "new": "v"},
        ]});
        let (_, value) = call(tool(&dir), args).await;
        assert_eq!(
            value.message,
            "File successfully edited. Applied 2 edit(s) with 4 total replacement(s)."
        );
        assert_eq!(dir.read("a.py"), "w = 1\nv = w\nz = w\n");
    }

    #[tokio::test]
    async fn only_the_first_occurrence_without_replace_all() {
        let dir = TestDir::new();
        dir.write("a.txt", "a a a");
        let (_, value) = call(
            tool(&dir),
            json!({"path": "a.txt", "edit": {"old": "a", "new": "b"}}),
        )
        .await;
        assert_eq!(
            value.message,
            "File successfully edited. Applied 1 edit(s) with 1 total replacement(s)."
        );
        assert_eq!(dir.read("a.txt"), "b a a");
    }

    #[tokio::test]
    async fn crlf_files_keep_their_line_endings() {
        let dir = TestDir::new();
        dir.write("win.txt", "one\r\ntwo\r\n");
        let (_, value) = call(
            tool(&dir),
            json!({"path": "win.txt", "edit": {"old": "one\ntwo", "new": "1\n2"}}),
        )
        .await;
        assert!(!value.is_error, "{value:?}");
        assert_eq!(dir.read("win.txt"), "1\r\n2\r\n");
    }

    #[tokio::test]
    async fn a_change_made_while_waiting_is_kept() {
        let dir = TestDir::new();
        dir.write("f.txt", "alpha\nbeta\n");
        let plan = tool(&dir)
            .plan(
                json!({"path": "f.txt", "edit": {"old": "beta", "new": "BETA"}}),
                ctx(),
            )
            .await
            .unwrap();
        dir.write("f.txt", "alpha\ngamma\nbeta\n");
        let value = plan.run.await;
        assert!(!value.is_error);
        assert_eq!(dir.read("f.txt"), "alpha\ngamma\nBETA\n");
    }

    #[tokio::test]
    async fn errors() {
        let dir = TestDir::new();
        dir.write("f.txt", "content");
        dir.mkdir("d");
        let no_match = "No replacements were made. The old string was not found in the file.";
        for (args, message, brief) in [
            (
                json!({"path": "", "edit": {"old": "a", "new": "b"}}),
                "File path cannot be empty.",
                "Empty file path",
            ),
            (
                json!({"path": "../f.txt", "edit": {"old": "a", "new": "b"}}),
                "`../f.txt` is not an absolute path. You must provide an absolute path to edit a file outside the working directory.",
                "Invalid path",
            ),
            (
                json!({"path": "nope.txt", "edit": {"old": "a", "new": "b"}}),
                "`nope.txt` does not exist.",
                "File not found",
            ),
            (
                json!({"path": "d", "edit": {"old": "a", "new": "b"}}),
                "`d` is not a file.",
                "Invalid path",
            ),
            (
                json!({"path": "f.txt", "edit": {"old": "missing", "new": "b"}}),
                no_match,
                "No replacements made",
            ),
            // Identical old and new change nothing, which is the same failure.
            (
                json!({"path": "f.txt", "edit": {"old": "content", "new": "content"}}),
                no_match,
                "No replacements made",
            ),
            (
                json!({"path": "f.txt", "edit": []}),
                no_match,
                "No replacements made",
            ),
        ] {
            let (effect, value) = call(tool(&dir), args).await;
            assert_eq!(effect, None);
            assert_eq!(value, ToolReturnValue::error("", message, brief));
        }
        assert_eq!(dir.read("f.txt"), "content");
    }

    #[test]
    fn crlf_detection() {
        assert!(all_crlf(b"a\r\nb\r\n"));
        assert!(!all_crlf(b"a\r\nb\n"));
        assert!(!all_crlf(b"a\rb\r\n"));
        assert!(!all_crlf(b"no breaks"));
    }
}
