//! The file tools: [`ReadFile`], [`ReadMediaFile`], [`Glob`], [`Grep`], [`WriteFile`] and
//! [`StrReplaceFile`].
//!
//! They follow the reference's `kimi_cli/tools/file/` in parameters, limits and every message the model
//! or a client can see; descriptions are our own (`descriptions/*.md`).
//!
//! Layout:
//! - `paths`: `~` expansion, lexical canonical paths, the workspace rule, the directory listing;
//! - `real_path`: where a path really leads (symlinks resolved), and opening exactly that file
//!   without following symlinks, so a decision and the I/O after it see the same file;
//! - `scope`: whether a real path lies in the workspace, and how approvals name it;
//! - `access`: the reading tools' gate (secrets refused, reads outside the workspace asked);
//! - [`sensitive`]: the secret-file filter the reading tools apply;
//! - `file_type`: text / image / video / binary detection;
//! - `diff`: the diff display blocks of the two editing tools;
//! - one module per tool.
//!
//! Every decision is made on the real path (docs/security.md): reading tools declare
//! [`Effect::ReadOnly`](kimi_core::Effect) inside the workspace and a side effect (the
//! [`ACTION_READ_OUTSIDE`] question) outside it; the editing tools compute their change while
//! planning, so the approval request names the real file and shows the diff, and write only when run,
//! to that same file. Nothing here asks for approval or knows about plan mode: the toolset does both
//! from the declared effect (its `writes` list names the file).

mod access;
mod diff;
mod edit;
mod file_type;
mod glob;
mod grep;
mod paths;
mod read;
mod read_media;
mod real_path;
mod scope;
pub mod sensitive;
mod write;

pub use access::ACTION_READ_OUTSIDE;
pub use edit::StrReplaceFile;
pub use glob::{Glob, GlobRules};
pub use grep::Grep;
pub use read::ReadFile;
pub use read_media::ReadMediaFile;
pub use sensitive::SecretFiles;
pub use write::WriteFile;

pub(crate) use paths::expand_user;
use std::path::{Path, PathBuf};

use kimi_core::schema_for;
use kimi_core::{CallContext, Environment};
use kimi_llm::ToolSpec;
use kimi_wire::message::ToolReturnValue;
use schemars::JsonSchema;

/// The approval action for edits inside the workspace (also the "approve for session" key).
pub const ACTION_EDIT: &str = "edit file";
/// The approval action for edits outside the workspace.
pub const ACTION_EDIT_OUTSIDE: &str = "edit file outside of working directory";

/// What the file tools know besides the workspace.
#[derive(Debug, Clone, Default)]
pub struct FileSettings {
    /// Directories the reading tools read without asking, besides the workspace and the session
    /// directory (where large outputs are saved): the skills directories and the plans directory.
    pub read_roots: Vec<PathBuf>,
    /// The agent's own secrets (its configuration and credentials), refused like any secret.
    pub secrets: sensitive::SecretFiles,
}

/// A tool's spec from its argument type and description.
fn tool_spec<T: JsonSchema>(name: &str, description: &str) -> ToolSpec {
    ToolSpec {
        name: name.to_owned(),
        description: description.trim_end().to_owned(),
        parameters: schema_for::<T>(),
    }
}

/// An integer or `null`, as pydantic writes `int | None`.
fn optional_integer(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({ "anyOf": [{ "type": "integer" }, { "type": "null" }] })
}

/// A failed result with empty output, as the reference's `ToolError(message=.., brief=..)`.
fn tool_error(message: impl Into<String>, brief: &str) -> ToolReturnValue {
    ToolReturnValue::error("", message, brief)
}

/// The sandbox's writable roots, for the tools that write: `real`, the target's real path
/// ([`scope::Target::real`], the file the write will open following no symlink), must lie in one of
/// them. Called when planning, so a refused write is never put to the user, and again just before
/// writing, against the roots as they are then (as a command started then would be). In plan mode the
/// toolset lets a call write nothing but the plan file (the agent's own file, outside the workspace),
/// so the roots do not apply there.
fn check_sandbox(env: &Environment, real: &Path, plan_mode: bool) -> Result<(), ToolReturnValue> {
    if plan_mode {
        return Ok(());
    }
    env.check_write(real)
        .map_err(|e| tool_error(e.to_string(), "Outside the sandbox"))
}

/// Whose file a write that went ahead lands in: in plan mode the toolset lets a call write nothing but
/// the plan file, which is the agent's own and kept private; otherwise the user's.
fn owner(ctx: &CallContext) -> real_path::Owner {
    if ctx.plan_mode {
        real_path::Owner::Agent
    } else {
        real_path::Owner::User
    }
}

/// Decodes file bytes as the reference's text reads do: UTF-8 with invalid bytes replaced, and
/// universal newlines (`\r\n` and a lone `\r` become `\n`).
fn decode_text(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    if text.contains('\r') {
        text.replace("\r\n", "\n").replace('\r', "\n")
    } else {
        text.into_owned()
    }
}

/// Runs file-system work on the blocking pool; a panic or shutdown becomes an error text.
async fn blocking<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> Result<T, String> {
    tokio::task::spawn_blocking(work).await.map_err(|e| e.to_string())
}

#[cfg(test)]
pub(crate) mod test_support {
    //! A temp work dir and a way to drive a tool through plan and run, as the toolset would.

    use std::path::{Path, PathBuf};
    use std::sync::Arc;

    use kimi_core::Environment;
    use kimi_core::{CallContext, Effect, Tool};
    use kimi_wire::message::ToolReturnValue;
    use serde_json::Value;
    use tokio_util::sync::CancellationToken;

    /// A temporary work dir (canonicalized, so paths compare equal to what the tools print).
    pub struct TestDir {
        _dir: tempfile::TempDir,
        pub root: PathBuf,
    }

    impl TestDir {
        pub fn new() -> Self {
            let dir = tempfile::tempdir().unwrap();
            let root = dir.path().canonicalize().unwrap();
            Self { _dir: dir, root }
        }

        pub fn env(&self) -> Arc<Environment> {
            Arc::new(Environment::new(
                self.root.clone(),
                Vec::new(),
                self.root.join(".session"),
            ))
        }

        pub fn path(&self, rel: &str) -> PathBuf {
            self.root.join(rel)
        }

        pub fn write(&self, rel: &str, text: &str) {
            self.write_bytes(rel, text.as_bytes());
        }

        pub fn write_bytes(&self, rel: &str, bytes: &[u8]) {
            let path = self.path(rel);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).unwrap();
            }
            std::fs::write(path, bytes).unwrap();
        }

        pub fn mkdir(&self, rel: &str) {
            std::fs::create_dir_all(self.path(rel)).unwrap();
        }

        pub fn read(&self, rel: &str) -> String {
            std::fs::read_to_string(self.path(rel)).unwrap()
        }

        pub fn show(&self, rel: &str) -> String {
            display(&self.path(rel))
        }
    }

    pub fn display(path: &Path) -> String {
        path.to_string_lossy().into_owned()
    }

    pub fn ctx() -> CallContext {
        CallContext::new("tc-1", None, CancellationToken::new())
    }

    /// Plans and (if planning succeeded) runs the call; the effect is `None` when planning refused it.
    pub async fn call<T: Tool + 'static>(tool: Arc<T>, args: Value) -> (Option<Effect>, ToolReturnValue) {
        match tool.plan(args, ctx()).await {
            Ok(plan) => (Some(plan.effect), plan.run.await),
            Err(value) => (None, value),
        }
    }

    pub fn ok_text(output: &str, message: &str) -> ToolReturnValue {
        ToolReturnValue::ok(output, message)
    }
}
