//! `WriteFile`: create, overwrite or append to a text file, after approval.
//!
//! Reference: `kimi_cli/tools/file/write.py`. Planning checks the path (the parent directory must
//! exist), reads the current text and builds the diff shown in the approval request; running writes
//! the content exactly as given (no newline translation) and reports the new size.

use std::path::PathBuf;
use std::sync::Arc;

use futures::future::BoxFuture;
use kimi_core::state::Environment;
use kimi_core::toolset::{ApprovalAsk, CallContext, Plan, Tool, parse_args};
use kimi_llm::ToolSpec;
use kimi_wire::message::{DisplayBlock, ToolReturnValue};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::io::AsyncWriteExt;

use super::diff::build_diff_blocks;
use super::paths::{is_within_workspace, resolve_tool_path};
use super::{ACTION_EDIT, ACTION_EDIT_OUTSIDE, blocking, check_sandbox, decode_text, tool_error, tool_spec};

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
}

impl WriteFile {
    /// The tool, resolving relative paths against `env.work_dir`.
    pub fn new(env: Arc<Environment>) -> Self {
        Self {
            spec: tool_spec::<WriteParams>("WriteFile", include_str!("descriptions/write.md")),
            env,
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
            let prepared = prepare(&self.env, &params).await?;
            check_sandbox(&self.env, &prepared.path, ctx.plan_mode)?;
            let ask = ApprovalAsk {
                action: prepared.action.to_owned(),
                description: format!("Write file `{}`", prepared.path.display()),
                display: prepared.diff.clone(),
                writes: vec![prepared.path.clone()],
            };
            let run = async move {
                if let Err(refusal) = check_sandbox(&self.env, &prepared.path, ctx.plan_mode) {
                    return refusal;
                }
                run(params, prepared).await
            };
            Ok(Plan::side_effect(ask, Box::pin(run)))
        })
    }
}

/// What planning found out.
#[derive(Debug)]
struct Prepared {
    path: PathBuf,
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

async fn prepare(env: &Environment, params: &WriteParams) -> Result<Prepared, ToolReturnValue> {
    let raw = params.path.as_str();
    if raw.is_empty() {
        return Err(tool_error("File path cannot be empty.", "Empty file path"));
    }
    let path = resolve_tool_path(raw, env, "write").map_err(|message| tool_error(message, "Invalid path"))?;
    let parent_exists = match path.parent() {
        Some(parent) => tokio::fs::try_exists(parent).await.unwrap_or(false),
        None => true,
    };
    if !parent_exists {
        return Err(tool_error(
            format!("`{raw}` parent directory does not exist."),
            "Parent directory not found",
        ));
    }
    let old_text = match tokio::fs::try_exists(&path).await {
        Ok(true) => {
            let bytes = tokio::fs::read(&path)
                .await
                .map_err(|e| failed(raw, &e.to_string()))?;
            decode_text(&bytes)
        }
        Ok(false) => String::new(),
        Err(e) => return Err(failed(raw, &e.to_string())),
    };
    let new_text = match params.mode {
        WriteMode::Overwrite => params.content.clone(),
        WriteMode::Append => format!("{old_text}{}", params.content),
    };
    let shown = path.to_string_lossy().into_owned();
    let diff = blocking(move || build_diff_blocks(&shown, &old_text, &new_text))
        .await
        .map_err(|e| failed(raw, &e))?;
    let action = if is_within_workspace(&path, env) {
        ACTION_EDIT
    } else {
        ACTION_EDIT_OUTSIDE
    };
    Ok(Prepared { path, action, diff })
}

async fn run(params: WriteParams, prepared: Prepared) -> ToolReturnValue {
    let raw = params.path.as_str();
    let written = match params.mode {
        WriteMode::Overwrite => tokio::fs::write(&prepared.path, params.content.as_bytes()).await,
        WriteMode::Append => append(&prepared.path, params.content.as_bytes()).await,
    };
    if let Err(e) = written {
        return failed(raw, &e.to_string());
    }
    let size = match tokio::fs::metadata(&prepared.path).await {
        Ok(meta) => meta.len(),
        Err(e) => return failed(raw, &e.to_string()),
    };
    let verb = match params.mode {
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

async fn append(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut file = tokio::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .await?;
    file.write_all(bytes).await?;
    file.flush().await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::file::test_support::{TestDir, call};
    use kimi_core::toolset::Effect;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn tool(dir: &TestDir) -> Arc<WriteFile> {
        Arc::new(WriteFile::new(dir.env()))
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
