//! Session state shared by the loop, the tools and `state.json` (reference `session_state.py`), and the
//! client's declared capabilities.

use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use kimi_wire::message::TodoDisplayItem;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::approval::ApprovalState;

/// `state.json`, field for field; unknown fields are kept so a file written by a newer reference survives
/// a round trip through us.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StateFile {
    /// Format version (1).
    #[serde(default = "one")]
    pub version: u32,
    /// yolo / afk / actions approved for the session.
    #[serde(default)]
    pub approval: ApprovalState,
    /// Extra directories added with `--add-dir` or `/add-dir`.
    #[serde(default)]
    pub additional_dirs: Vec<String>,
    /// A title the user set.
    #[serde(default)]
    pub custom_title: Option<String>,
    /// Whether the title was generated.
    #[serde(default)]
    pub title_generated: bool,
    /// How often title generation was tried.
    #[serde(default)]
    pub title_generate_attempts: u32,
    /// Plan mode.
    #[serde(default)]
    pub plan_mode: bool,
    /// Session the plan belongs to.
    #[serde(default)]
    pub plan_session_id: Option<String>,
    /// The plan file's slug.
    #[serde(default)]
    pub plan_slug: Option<String>,
    /// mtime of wire.jsonl when last indexed.
    #[serde(default)]
    pub wire_mtime: Option<f64>,
    /// Archived sessions are hidden from lists.
    #[serde(default)]
    pub archived: bool,
    /// When it was archived.
    #[serde(default)]
    pub archived_at: Option<f64>,
    /// Never auto-archive.
    #[serde(default)]
    pub auto_archive_exempt: bool,
    /// The todo list.
    #[serde(default)]
    pub todos: Vec<TodoDisplayItem>,
    /// Anything else the file held.
    #[serde(flatten)]
    pub other: serde_json::Map<String, Value>,
}

fn one() -> u32 {
    1
}

impl Default for StateFile {
    fn default() -> Self {
        serde_json::from_value(Value::Object(Default::default())).unwrap_or_else(|_| Self {
            version: 1,
            approval: ApprovalState::default(),
            additional_dirs: Vec::new(),
            custom_title: None,
            title_generated: false,
            title_generate_attempts: 0,
            plan_mode: false,
            plan_session_id: None,
            plan_slug: None,
            wire_mtime: None,
            archived: false,
            archived_at: None,
            auto_archive_exempt: false,
            todos: Vec::new(),
            other: Default::default(),
        })
    }
}

impl StateFile {
    /// Reads `path`; a missing or unreadable file gives the defaults (logged).
    pub fn load(path: &std::path::Path) -> Self {
        match std::fs::read_to_string(path) {
            Ok(text) => serde_json::from_str(&text).unwrap_or_else(|e| {
                tracing::warn!(path = %path.display(), error = %e, "state.json unreadable; using defaults");
                Self::default()
            }),
            Err(_) => Self::default(),
        }
    }
}

/// The mutable session state tools share (the todo list for now).
#[derive(Debug, Default)]
pub struct SessionState {
    todos: Mutex<Vec<TodoDisplayItem>>,
}

impl SessionState {
    /// State starting with `todos`.
    pub fn new(todos: Vec<TodoDisplayItem>) -> Self {
        Self {
            todos: Mutex::new(todos),
        }
    }

    /// The todo list.
    pub fn todos(&self) -> Vec<TodoDisplayItem> {
        crate::sync::lock(&self.todos).clone()
    }

    /// Replaces the todo list.
    pub fn set_todos(&self, todos: Vec<TodoDisplayItem>) {
        *crate::sync::lock(&self.todos) = todos;
    }
}

/// What the client declared at `initialize`.
#[derive(Debug, Default)]
pub struct ClientFlags {
    supports_question: AtomicBool,
    supports_plan_mode: AtomicBool,
}

impl ClientFlags {
    /// Records the declared capabilities.
    pub fn set(&self, supports_question: bool, supports_plan_mode: bool) {
        self.supports_question.store(supports_question, Ordering::SeqCst);
        self.supports_plan_mode
            .store(supports_plan_mode, Ordering::SeqCst);
    }

    /// Can the client answer `QuestionRequest`s?
    pub fn supports_question(&self) -> bool {
        self.supports_question.load(Ordering::SeqCst)
    }

    /// Does the client handle plan mode?
    pub fn supports_plan_mode(&self) -> bool {
        self.supports_plan_mode.load(Ordering::SeqCst)
    }
}

/// Facts about the machine and workspace tools read.
#[derive(Debug)]
pub struct Environment {
    /// The work dir (normalized).
    pub work_dir: PathBuf,
    /// Extra directories tools may use; `/add-dir` adds to them during the session.
    additional_dirs: std::sync::RwLock<Vec<PathBuf>>,
    /// The session directory (large outputs are saved here).
    pub session_dir: PathBuf,
    /// How the model's commands and the file tools' writes are confined.
    sandbox: std::sync::Arc<crate::sandbox::Sandbox>,
}

impl Environment {
    /// The workspace of a session.
    pub fn new(work_dir: PathBuf, additional_dirs: Vec<PathBuf>, session_dir: PathBuf) -> Self {
        Self {
            work_dir,
            additional_dirs: std::sync::RwLock::new(additional_dirs),
            session_dir,
            sandbox: std::sync::Arc::default(),
        }
    }

    /// The same workspace with `sandbox` (the default is none).
    #[must_use]
    pub fn with_sandbox(mut self, sandbox: std::sync::Arc<crate::sandbox::Sandbox>) -> Self {
        self.sandbox = sandbox;
        self
    }

    /// The session's sandbox.
    pub fn sandbox(&self) -> &crate::sandbox::Sandbox {
        &self.sandbox
    }

    /// How the model's commands are confined now (the `initialize` extension field, and what the
    /// model is told).
    pub fn sandbox_info(&self) -> kimi_wire::params::SandboxInfo {
        self.sandbox.info(&self.work_dir, &self.additional_dirs())
    }

    /// The confinement of a command the model starts now, or why it may not start.
    pub fn command_sandbox(&self) -> Result<crate::sandbox::CommandSandbox, crate::sandbox::SandboxError> {
        self.sandbox.command(&self.work_dir, &self.additional_dirs())
    }

    /// Whether an in-process tool may write the file at the real path `real` (no symlink on it:
    /// [`crate::sandbox::Sandbox::check_write`]).
    pub fn check_write(&self, real: &std::path::Path) -> Result<(), crate::sandbox::SandboxError> {
        if !self.sandbox.policy().mode.confines_files() {
            return Ok(());
        }
        self.sandbox
            .check_write(real, &self.work_dir, &self.additional_dirs())
    }

    /// The extra directories, in the order they were added.
    pub fn additional_dirs(&self) -> Vec<PathBuf> {
        crate::sync::read(&self.additional_dirs).clone()
    }

    /// Whether `path` lies in one of the extra directories (by path components), without copying them:
    /// the file tools ask on every call.
    pub fn in_additional_dir(&self, path: &std::path::Path) -> bool {
        crate::sync::read(&self.additional_dirs)
            .iter()
            .any(|dir| path.starts_with(dir))
    }

    /// Adds an extra directory (the caller checked it is new and readable).
    pub fn add_dir(&self, dir: PathBuf) {
        crate::sync::write(&self.additional_dirs).push(dir);
    }
}
