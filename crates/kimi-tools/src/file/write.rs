//! `WriteFile`: create, overwrite or append to a text file, after approval.
//!
//! Reference: `kimi_cli/tools/file/write.py`. Planning checks the path (the parent directory must
//! exist), reads the current text and builds the diff shown in the approval request; running writes
//! the content exactly as given (no newline translation) and reports the new size.
//!
//! Beyond the reference, the decision is made on the real target (symlinks resolved): the approval
//! names it, a target outside the workspace is the "outside" action, and the write opens exactly
//! that file without following symlinks, so a link swapped in while the user decides makes the write
//! fail instead of landing elsewhere.

use std::sync::Arc;

use futures::future::BoxFuture;
use kimi_core::Environment;
use kimi_core::{ApprovalAsk, CallContext, Plan, Tool, parse_args};
use kimi_llm::ToolSpec;
use kimi_wire::message::{DisplayBlock, ToolReturnValue};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::diff::build_diff_blocks;
use super::paths::resolve_tool_path;
use super::real_path::{OpenFor, Owner, read_real, write_real};
use super::scope::Target;
use super::{
    ACTION_EDIT, ACTION_EDIT_OUTSIDE, FileSettings, blocking, check_sandbox, decode_text, owner, tool_error,
    tool_spec,
};

// How the content is written: replace the whole file, or add to its end. (No doc comments on the
// variants, so the schema is a plain string `enum` as the reference's.)
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum WriteMode {
    #[default]
    Overwrite,
    Append,
}

// Arguments of `WriteFile` (field doc comments are the parameter descriptions).
#[derive(Debug, Deserialize, JsonSchema)]
struct WriteParams {
    /// File to write. Relative paths start at the working directory; files outside it need an absolute path.
    path: String,
    /// The text to write.
    content: String,
    /// `overwrite` (the default) replaces the whole file; `append` adds the content to the end of the file.
    #[serde(default)]
    mode: WriteMode,
}

/// Writes text files for the model.
#[derive(Debug)]
pub struct WriteFile {
    spec: ToolSpec,
    env: Arc<Environment>,
    settings: FileSettings,
}

impl WriteFile {
    /// The tool, resolving relative paths against `env.work_dir`.
    pub fn new(env: Arc<Environment>, settings: FileSettings) -> Self {
        Self {
            spec: tool_spec::<WriteParams>("WriteFile", include_str!("descriptions/write.md")),
            env,
            settings,
        }
    }
}

impl Tool for WriteFile {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn plan(
        self: Arc<Self>,
        args: Value,
        ctx: CallContext,
    ) -> BoxFuture<'static, Result<Plan, ToolReturnValue>> {
        Box::pin(async move {
            let params: WriteParams = parse_args(args)?;
            let prepared = prepare(&self.env, &self.settings, &params).await?;
            check_sandbox(&self.env, &prepared.target.real, ctx.plan_mode)?;
            let ask = ApprovalAsk {
                action: prepared.action.to_owned(),
                description: format!("Write file `{}`", prepared.target.shown.display()),
                display: prepared.diff.clone(),
                detail_display: Vec::new(),
                writes: vec![prepared.target.shown.clone()],
            };
            let run = async move {
                if let Err(refusal) = check_sandbox(&self.env, &prepared.target.real, ctx.plan_mode) {
                    return refusal;
                }
                run(params, prepared, owner(&ctx)).await
            };
            Ok(Plan::side_effect(ask, Box::pin(run)))
        })
    }
}

/// What planning found out.
#[derive(Debug)]
struct Prepared {
    target: Target,
    action: &'static str,
    diff: Vec<DisplayBlock>,
}

fn failed(raw: &str, error: &str) -> ToolReturnValue {
    tracing::warn!(path = raw, error, "WriteFile failed");
    tool_error(
        format!("Failed to write to {raw}. Error: {error}"),
        "Failed to write file",
    )
}

async fn prepare(
    env: &Arc<Environment>,
    settings: &FileSettings,
    params: &WriteParams,
) -> Result<Prepared, ToolReturnValue> {
    let raw = params.path.as_str();
    if raw.is_empty() {
        return Err(tool_error("File path cannot be empty.", "Empty file path"));
    }
    let named =
        resolve_tool_path(raw, env, "write").map_err(|message| tool_error(message, "Invalid path"))?;
    let parent_exists = match named.parent() {
        Some(parent) => tokio::fs::try_exists(parent).await.unwrap_or(false),
        None => true,
    };
    if !parent_exists {
        return Err(tool_error(
            format!("`{raw}` parent directory does not exist."),
            "Parent directory not found",
        ));
    }
    let (env, roots, mode) = (Arc::clone(env), settings.read_roots.clone(), params.mode);
    let content = params.content.clone();
    let work = blocking(move || -> std::io::Result<_> {
        let target = Target::resolve(named, &env, &roots)?;
        let old_text = match std::fs::symlink_metadata(&target.real) {
            Ok(_) => decode_text(&read_real(&target.real)?),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(e),
        };
        let new_text = match mode {
            WriteMode::Overwrite => content,
            WriteMode::Append => format!("{old_text}{content}"),
        };
        let diff = build_diff_blocks(&target.shown.to_string_lossy(), &old_text, &new_text);
        Ok((target, diff))
    });
    let (target, diff) = work
        .await
        .map_err(|e| failed(raw, &e))?
        .map_err(|e| failed(raw, &e.to_string()))?;
    let action = if target.in_workspace {
        ACTION_EDIT
    } else {
        ACTION_EDIT_OUTSIDE
    };
    Ok(Prepared { target, action, diff })
}

async fn run(params: WriteParams, prepared: Prepared, owner: Owner) -> ToolReturnValue {
    let raw = params.path.clone();
    let (mode, real) = (params.mode, prepared.target.real.clone());
    let how = match mode {
        WriteMode::Overwrite => OpenFor::Overwrite,
        WriteMode::Append => OpenFor::Append,
    };
    let written = blocking(move || write_real(&real, how, owner, params.content.as_bytes())).await;
    let size = match written {
        Ok(Ok(size)) => size,
        Ok(Err(e)) => return failed(&raw, &e.to_string()),
        Err(e) => return failed(&raw, &e),
    };
    let verb = match mode {
        WriteMode::Overwrite => "overwritten",
        WriteMode::Append => "appended to",
    };
    ToolReturnValue {
        display: prepared.diff,
        ..ToolReturnValue::ok(
            "",
            format!("File successfully {verb}. Current size: {size} bytes."),
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

    fn tool(dir: &TestDir) -> Arc<WriteFile> {
        Arc::new(WriteFile::new(dir.env(), FileSettings::default()))
    }

    fn diff(path: &str, old_text: &str, new_text: &str, old_start: u32, new_start: u32) -> DisplayBlock {
        DisplayBlock::Diff {
            path: path.into(),
            old_text: old_text.into(),
            new_text: new_text.into(),
            old_start,
            new_start,
            is_summary: false,
        }
    }

    #[tokio::test]
    async fn new_file_asks_with_the_whole_text_as_diff() {
        let dir = TestDir::new();
        let (effect, value) = call(
            tool(&dir),
            json!({"path": "file.txt", "content": "hello", "mode": "overwrite"}),
        )
        .await;
        let shown = dir.show("file.txt");
        let blocks = vec![diff(&shown, "", "hello", 1, 1)];
        assert_eq!(
            effect,
            Some(Effect::SideEffect(ApprovalAsk {
                action: "edit file".into(),
                description: format!("Write file `{shown}`"),
                display: blocks.clone(),
                detail_display: Vec::new(),
                writes: vec![dir.path("file.txt")],
            }))
        );
        assert_eq!(
            value,
            ToolReturnValue {
                display: blocks,
                ..ToolReturnValue::ok("", "File successfully overwritten. Current size: 5 bytes.")
            }
        );
        assert_eq!(dir.read("file.txt"), "hello");
    }

    #[tokio::test]
    async fn append_adds_to_the_end_and_diffs_against_the_old_text() {
        let dir = TestDir::new();
        dir.write("log.txt", "one\n");
        let (effect, value) = call(
            tool(&dir),
            json!({"path": "log.txt", "content": "two\n", "mode": "append"}),
        )
        .await;
        let shown = dir.show("log.txt");
        let Some(Effect::SideEffect(ask)) = effect else {
            panic!("expected an approval ask")
        };
        assert_eq!(ask.display, vec![diff(&shown, "one", "one\ntwo", 1, 1)]);
        assert_eq!(
            value.message,
            "File successfully appended to. Current size: 8 bytes."
        );
        assert_eq!(dir.read("log.txt"), "one\ntwo\n");
    }

    #[tokio::test]
    async fn content_is_written_verbatim() {
        let dir = TestDir::new();
        dir.write("crlf.txt", "a\r\nb\r\n");
        let (_, value) = call(tool(&dir), json!({"path": "crlf.txt", "content": "x\r\ny\r\n"})).await;
        assert!(!value.is_error);
        assert_eq!(dir.read("crlf.txt"), "x\r\ny\r\n");
    }

    #[tokio::test]
    async fn outside_the_workspace_is_a_different_action() {
        let dir = TestDir::new();
        let other = tempfile::tempdir().unwrap();
        let target = other.path().canonicalize().unwrap().join("o.txt");
        let (effect, _) = call(
            tool(&dir),
            json!({"path": target.to_string_lossy(), "content": "x"}),
        )
        .await;
        let Some(Effect::SideEffect(ask)) = effect else {
            panic!("expected an approval ask")
        };
        assert_eq!(ask.action, "edit file outside of working directory");
        assert_eq!(ask.writes, vec![target]);
    }

    #[tokio::test]
    async fn a_symlink_is_judged_and_named_by_its_target() {
        let dir = TestDir::new();
        let other = tempfile::tempdir().unwrap();
        let outside = other.path().canonicalize().unwrap();
        std::fs::write(outside.join("bashrc"), "keep").unwrap();
        std::os::unix::fs::symlink(outside.join("bashrc"), dir.path("notes.md")).unwrap();
        std::os::unix::fs::symlink(&outside, dir.path("linked")).unwrap();
        for (path, target) in [
            ("notes.md", "bashrc"),
            ("linked/bashrc", "bashrc"),
            ("linked/new", "new"),
        ] {
            let plan = tool(&dir)
                .plan(json!({"path": path, "content": "x"}), ctx())
                .await
                .unwrap();
            let Effect::SideEffect(ask) = plan.effect else {
                panic!("expected an approval ask")
            };
            let real = outside.join(target);
            assert_eq!(ask.action, "edit file outside of working directory", "{path}");
            assert_eq!(ask.description, format!("Write file `{}`", real.display()));
            assert_eq!(ask.writes, vec![real]);
        }
        assert_eq!(std::fs::read_to_string(outside.join("bashrc")).unwrap(), "keep");
    }

    #[tokio::test]
    async fn a_symlink_swapped_in_while_waiting_is_not_written_through() {
        let dir = TestDir::new();
        let other = tempfile::tempdir().unwrap();
        std::fs::write(other.path().join("bashrc"), "keep").unwrap();
        dir.write("notes.md", "old");
        let plan = tool(&dir)
            .plan(json!({"path": "notes.md", "content": "evil"}), ctx())
            .await
            .unwrap();
        std::fs::remove_file(dir.path("notes.md")).unwrap();
        std::os::unix::fs::symlink(other.path().join("bashrc"), dir.path("notes.md")).unwrap();
        let value = plan.run.await;
        assert!(value.is_error, "{value:?}");
        assert!(
            value.message.contains("changed after it was checked"),
            "{}",
            value.message
        );
        assert_eq!(
            std::fs::read_to_string(other.path().join("bashrc")).unwrap(),
            "keep"
        );
    }

    #[tokio::test]
    async fn errors_come_before_any_approval() {
        let dir = TestDir::new();
        dir.mkdir("adir");
        for (args, message, brief) in [
            (json!({"path": "", "content": "x"}), "File path cannot be empty.".to_owned(), "Empty file path"),
            (
                json!({"path": "../x.txt", "content": "x"}),
                "`../x.txt` is not an absolute path. You must provide an absolute path to write a file outside the working directory.".to_owned(),
                "Invalid path",
            ),
            (
                json!({"path": "no/such/dir/x.txt", "content": "x"}),
                "`no/such/dir/x.txt` parent directory does not exist.".to_owned(),
                "Parent directory not found",
            ),
            (
                json!({"path": "adir", "content": "x"}),
                "Failed to write to adir. Error: Is a directory (os error 21)".to_owned(),
                "Failed to write file",
            ),
        ] {
            let (effect, value) = call(tool(&dir), args).await;
            assert_eq!(effect, None);
            assert_eq!(value, ToolReturnValue::error("", message, brief));
        }
        let (_, value) = call(
            tool(&dir),
            json!({"path": "x", "content": "x", "mode": "prepend"}),
        )
        .await;
        assert!(
            value
                .message
                .starts_with("Error validating JSON arguments: unknown variant `prepend`"),
            "{}",
            value.message
        );
    }
}
