//! `StrReplaceFile`: exact string replacements in a text file, after approval.
//!
//! Reference: `kimi_cli/tools/file/replace.py`. Edits apply in order, each to the result of the one
//! before. If the file ends up unchanged the call fails. Unlike the reference (seeds/002 `Edit`), an
//! `old` found more than once without `replace_all` is an error naming the count and the lines, instead
//! of silently changing the first match, and `old` equal to `new` is an error of its own. Planning computes the new text so the approval request shows the diff; running reads
//! the file again and re-applies the edits, so a change made meanwhile is not overwritten.
//!
//! The file is read as the reference reads it (invalid UTF-8 replaced, `\r\n` seen as `\n`). Unlike
//! the reference, which then writes every line ending back as `\n`, a file whose lines all end in
//! `\r\n` keeps them.
//!
//! As for WriteFile, the file is judged, named in the approval, read and written by its real path,
//! without following symlinks at write time.

use std::sync::Arc;

use futures::future::BoxFuture;
use kimi_core::Environment;
use kimi_core::{ApprovalAsk, CallContext, Plan, Tool, parse_args};
use kimi_llm::ToolSpec;
use kimi_wire::message::{DisplayBlock, ToolReturnValue};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::diff::build_diff_blocks;
use super::paths::resolve_tool_path;
use super::real_path::{OpenFor, Owner, read_real, write_real};
use super::scope::Target;
use super::{
    ACTION_EDIT, ACTION_EDIT_OUTSIDE, FileSettings, blocking, check_sandbox, decode_text, owner, tool_error,
    tool_spec,
};

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
    settings: FileSettings,
}

impl StrReplaceFile {
    /// The tool, resolving relative paths against `env.work_dir`.
    pub fn new(env: Arc<Environment>, settings: FileSettings) -> Self {
        Self {
            spec: tool_spec::<EditParams>("StrReplaceFile", include_str!("descriptions/edit.md")),
            env,
            settings,
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
            let (target, action, diff, planned) = prepare(&self.env, &self.settings, &params).await?;
            check_sandbox(&self.env, &target.real, ctx.plan_mode)?;
            let ask = ApprovalAsk {
                action: action.to_owned(),
                description: format!("Edit file `{}`", target.shown.display()),
                display: diff.clone(),
                detail_display: Vec::new(),
                writes: vec![target.shown.clone()],
            };
            let run = async move {
                if let Err(refusal) = check_sandbox(&self.env, &target.real, ctx.plan_mode) {
                    return refusal;
                }
                run(params, target, Planned { diff, text: planned }, owner(&ctx)).await
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

/// Reads the file at its real path (without following symlinks).
async fn load(real: &std::path::Path) -> std::io::Result<Loaded> {
    let real = real.to_path_buf();
    let bytes = blocking(move || read_real(&real))
        .await
        .map_err(std::io::Error::other)??;
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

/// Most line numbers an ambiguity error lists.
const MAX_LINES_LISTED: usize = 10;

/// Why an edit cannot be applied as asked.
#[derive(Debug, Clone, PartialEq, Eq)]
enum EditError {
    /// `old` is empty: it "matches" between every two characters, so it names no place.
    EmptyOld { edit: usize },
    /// `old` equals `new`: the edit would change nothing.
    Unchanged { edit: usize },
    /// `old` occurs more than once and `replace_all` is off: which one is meant is unknown.
    Ambiguous {
        edit: usize,
        count: usize,
        /// The lines the matches start on, each once (several matches may share a line).
        lines: Vec<usize>,
    },
}

impl EditError {
    fn into_result(self, edits: usize) -> ToolReturnValue {
        // Which edit, when the call has several (1-based, as the model counts).
        let which = |edit: usize| {
            if edits > 1 {
                format!("Edit {} of {edits}: ", edit + 1)
            } else {
                String::new()
            }
        };
        match self {
            Self::EmptyOld { edit } => tool_error(
                format!(
                    "{}`old` is empty, so it names no place in the file. Put the exact text to replace in \
                     `old`; to write a whole file, use WriteFile.",
                    which(edit)
                ),
                "Empty old text",
            ),
            Self::Unchanged { edit } => tool_error(
                format!(
                    "{}`old` and `new` are the same text, so nothing would change. Put the text the file \
                     should contain in `new`.",
                    which(edit)
                ),
                "Nothing to change",
            ),
            Self::Ambiguous { edit, count, lines } => {
                let mut listed = lines
                    .iter()
                    .take(MAX_LINES_LISTED)
                    .map(usize::to_string)
                    .collect::<Vec<_>>()
                    .join(", ");
                if lines.len() > MAX_LINES_LISTED {
                    listed.push_str(", …");
                }
                tool_error(
                    format!(
                        "{}`old` was found {count} times (starting on lines {listed}), and without \
                         `replace_all` it must match exactly once. Include more of the surrounding text in \
                         `old` so it matches only the place you mean, or set `replace_all` to true to \
                         replace every occurrence. Nothing was changed.",
                        which(edit)
                    ),
                    "Ambiguous match",
                )
            }
        }
    }
}

/// The 1-based line on which each occurrence of `needle` in `text` starts.
fn match_lines(text: &str, needle: &str) -> Vec<usize> {
    let (mut line, mut scanned) = (1, 0);
    text.match_indices(needle)
        .map(|(at, _)| {
            line += text[scanned..at].matches('\n').count();
            scanned = at;
            line
        })
        .collect()
}

/// Applies `edits` in order.
fn apply(content: &str, edits: &[Edit]) -> Result<String, EditError> {
    let mut text = content.to_owned();
    for (index, edit) in edits.iter().enumerate() {
        if edit.old.is_empty() {
            return Err(EditError::EmptyOld { edit: index });
        }
        if edit.old == edit.new {
            return Err(EditError::Unchanged { edit: index });
        }
        text = if edit.replace_all {
            text.replace(&edit.old, &edit.new)
        } else {
            let mut lines = match_lines(&text, &edit.old);
            if lines.len() > 1 {
                let count = lines.len();
                // Ascending already: several matches on one line are one line to look at.
                lines.dedup();
                return Err(EditError::Ambiguous {
                    edit: index,
                    count,
                    lines,
                });
            }
            text.replacen(&edit.old, &edit.new, 1)
        };
    }
    Ok(text)
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
    env: &Arc<Environment>,
    settings: &FileSettings,
    params: &EditParams,
) -> Result<(Target, &'static str, Vec<DisplayBlock>, String), ToolReturnValue> {
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
    let (named, env, roots) = (path, Arc::clone(env), settings.read_roots.clone());
    let target = blocking(move || Target::resolve(named, &env, &roots))
        .await
        .map_err(|e| failed(raw, &e))?
        .map_err(|e| failed(raw, &e.to_string()))?;
    let loaded = load(&target.real)
        .await
        .map_err(|e| failed(raw, &e.to_string()))?;
    let edits = params.edit.as_slice().to_vec();
    let shown = target.shown.to_string_lossy().into_owned();
    let count = edits.len();
    let diff = blocking(move || {
        let new_text = apply(&loaded.text, &edits)?;
        Ok((new_text != loaded.text)
            .then(|| (build_diff_blocks(&shown, &loaded.text, &new_text), loaded.text)))
    })
    .await
    .map_err(|e| failed(raw, &e))?
    .map_err(|e: EditError| e.into_result(count))?
    .ok_or_else(no_replacements)?;
    let action = if target.in_workspace {
        ACTION_EDIT
    } else {
        ACTION_EDIT_OUTSIDE
    };
    let (diff, planned) = diff;
    Ok((target, action, diff, planned))
}

/// What planning saw: the diff the approval showed, and the text it was computed from.
struct Planned {
    diff: Vec<DisplayBlock>,
    text: String,
}

async fn run(params: EditParams, target: Target, planned: Planned, owner: Owner) -> ToolReturnValue {
    let raw = params.path.as_str();
    let edits = params.edit.as_slice();
    // Re-read: the file may have changed while the user was deciding.
    let loaded = match load(&target.real).await {
        Ok(loaded) => loaded,
        Err(e) => return failed(raw, &e.to_string()),
    };
    let new_text = match apply(&loaded.text, edits) {
        Ok(new_text) => new_text,
        Err(e) => return e.into_result(edits.len()),
    };
    if new_text == loaded.text {
        return no_replacements();
    }
    // An earlier call of the step (or anyone) changed the file since the approval's diff was made: the
    // result shows what this edit really did.
    let display = if loaded.text == planned.text {
        planned.diff
    } else {
        let shown = target.shown.to_string_lossy().into_owned();
        let (old, new) = (loaded.text.clone(), new_text.clone());
        match blocking(move || build_diff_blocks(&shown, &old, &new)).await {
            Ok(diff) => diff,
            Err(e) => return failed(raw, &e),
        }
    };
    let bytes = if loaded.crlf {
        new_text.replace('\n', "\r\n")
    } else {
        new_text
    };
    let real = target.real.clone();
    match blocking(move || write_real(&real, OpenFor::Overwrite, owner, bytes.as_bytes())).await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => return failed(raw, &e.to_string()),
        Err(e) => return failed(raw, &e),
    }
    let total = count_replacements(&loaded.text, edits);
    ToolReturnValue {
        display,
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
    use kimi_core::Effect;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn tool(dir: &TestDir) -> Arc<StrReplaceFile> {
        Arc::new(StrReplaceFile::new(dir.env(), FileSettings::default()))
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
                detail_display: Vec::new(),
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

    /// A file changed between the approval and the run (an earlier write of the same step): the edit
    /// applies to the file as it is, and the result's diff shows that, not the approval's.
    #[tokio::test]
    async fn the_result_shows_the_diff_of_the_file_as_it_was_written() {
        let dir = TestDir::new();
        dir.write("file.txt", "hello\n");
        let args = json!({"path": "file.txt", "edit": {"old": "hello", "new": "hi"}});
        let plan = tool(&dir).plan(args, ctx()).await.unwrap();
        let shown = dir.show("file.txt");
        let Effect::SideEffect(ask) = &plan.effect else {
            panic!("an edit asks")
        };
        assert_eq!(ask.display, build_diff_blocks(&shown, "hello\n", "hi\n"));
        dir.write("file.txt", "first\nhello\n");
        let value = plan.run.await;
        assert_eq!(dir.read("file.txt"), "first\nhi\n");
        assert_eq!(
            value.display,
            build_diff_blocks(&shown, "first\nhello\n", "first\nhi\n")
        );
        assert_ne!(value.display, ask.display);
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
    async fn an_ambiguous_old_text_is_an_error_naming_the_count_and_the_lines() {
        let dir = TestDir::new();
        dir.write("a.txt", "a a\nb\nxa\n");
        let (effect, value) = call(
            tool(&dir),
            json!({"path": "a.txt", "edit": {"old": "a", "new": "b"}}),
        )
        .await;
        assert_eq!(effect, None, "nothing is put to the user");
        assert_eq!(
            value,
            ToolReturnValue::error(
                "",
                "`old` was found 3 times (starting on lines 1, 3), and without `replace_all` it must match \
                 exactly once. Include more of the surrounding text in `old` so it matches only the place you \
                 mean, or set `replace_all` to true to replace every occurrence. Nothing was changed.",
                "Ambiguous match",
            )
        );
        assert_eq!(dir.read("a.txt"), "a a\nb\nxa\n");
        // With enough context it matches once, and with replace_all every match changes.
        let (_, value) = call(
            tool(&dir),
            json!({"path": "a.txt", "edit": {"old": "xa", "new": "xb"}}),
        )
        .await;
        assert!(!value.is_error, "{value:?}");
        let (_, value) = call(
            tool(&dir),
            json!({"path": "a.txt", "edit": {"old": "a", "new": "c", "replace_all": true}}),
        )
        .await;
        assert!(!value.is_error, "{value:?}");
        assert_eq!(dir.read("a.txt"), "c c\nb\nxb\n");
    }

    #[tokio::test]
    async fn ambiguity_is_judged_on_the_text_each_edit_sees() {
        let dir = TestDir::new();
        dir.write("a.txt", "one\ntwo\n");
        // The first edit makes the second one's text appear twice.
        let args = json!({"path": "a.txt", "edit": [
            {"old": "two", "new": "one"},
            {"old": "one", "new": "1"},
        ]});
        let (_, value) = call(tool(&dir), args).await;
        assert_eq!(
            value.display,
            vec![DisplayBlock::Brief {
                text: "Ambiguous match".into()
            }]
        );
        assert!(
            value
                .message
                .starts_with("Edit 2 of 2: `old` was found 2 times (starting on lines 1, 2)"),
            "{}",
            value.message
        );
        assert_eq!(dir.read("a.txt"), "one\ntwo\n");
    }

    #[test]
    fn match_lines_counts_lines_before_each_match() {
        assert_eq!(match_lines("ab\n\nab ab\n", "ab"), vec![1, 3, 3]);
        assert_eq!(match_lines("x\ny", "z"), Vec::<usize>::new());
        assert_eq!(match_lines("a\nb\na", "a\n"), vec![1]);
    }

    #[test]
    fn long_match_lists_are_cut() {
        let text = "k\n".repeat(15);
        let error = apply(
            &text,
            &[Edit {
                old: "k".into(),
                new: "v".into(),
                replace_all: false,
            }],
        )
        .unwrap_err();
        let value = error.into_result(1);
        assert!(
            value
                .message
                .contains("found 15 times (starting on lines 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, …)"),
            "{}",
            value.message
        );
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
        dir.write("empty.txt", "");
        let no_match = "No replacements were made. The old string was not found in the file.";
        let empty_old = "`old` is empty, so it names no place in the file. Put the exact text to replace in \
                         `old`; to write a whole file, use WriteFile.";
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
            // Identical old and new would change nothing: an error of its own.
            (
                json!({"path": "f.txt", "edit": {"old": "content", "new": "content"}}),
                "`old` and `new` are the same text, so nothing would change. Put the text the file should contain in `new`.",
                "Nothing to change",
            ),
            // An empty old text names no place, in a full file or an empty one, with or without
            // replace_all (it would match between every two characters).
            (
                json!({"path": "f.txt", "edit": {"old": "", "new": "b"}}),
                empty_old,
                "Empty old text",
            ),
            (
                json!({"path": "empty.txt", "edit": {"old": "", "new": "b"}}),
                empty_old,
                "Empty old text",
            ),
            (
                json!({"path": "f.txt", "edit": {"old": "", "new": "b", "replace_all": true}}),
                empty_old,
                "Empty old text",
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
        assert_eq!(dir.read("empty.txt"), "");
    }

    #[tokio::test]
    async fn a_symlink_is_edited_as_its_target_and_asks_as_outside() {
        let dir = TestDir::new();
        let other = tempfile::tempdir().unwrap();
        let real = other.path().canonicalize().unwrap().join("bashrc");
        std::fs::write(&real, "alias ls=ls").unwrap();
        std::os::unix::fs::symlink(&real, dir.path("notes.md")).unwrap();
        let plan = tool(&dir)
            .plan(
                json!({"path": "notes.md", "edit": {"old": "ls=ls", "new": "ls=rm"}}),
                ctx(),
            )
            .await
            .unwrap();
        let Effect::SideEffect(ask) = plan.effect else {
            panic!("expected an approval ask")
        };
        assert_eq!(ask.action, "edit file outside of working directory");
        assert_eq!(ask.description, format!("Edit file `{}`", real.display()));
        assert_eq!(ask.writes, vec![real.clone()]);
        // Never run: rejected.
        drop(plan.run);
        assert_eq!(std::fs::read_to_string(&real).unwrap(), "alias ls=ls");
    }

    #[test]
    fn crlf_detection() {
        assert!(all_crlf(b"a\r\nb\r\n"));
        assert!(!all_crlf(b"a\r\nb\n"));
        assert!(!all_crlf(b"a\rb\r\n"));
        assert!(!all_crlf(b"no breaks"));
    }
}
