//! [`RunOptions`]: what the command line decides for a wire session, as plain data. The binary parses
//! its flags into it; [`super::session`] builds the session from it.

use std::path::PathBuf;

use crate::sandbox::SandboxMode;

/// Everything the command line decides for a wire session.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// `--work-dir` (default: the current directory).
    pub work_dir: Option<PathBuf>,
    /// `--session ID`.
    pub session: Option<String>,
    /// `--continue`.
    pub continue_last: bool,
    /// `--model ALIAS`.
    pub model: Option<String>,
    /// `--thinking` / `--no-thinking`.
    pub thinking: Option<bool>,
    /// `--yolo`.
    pub yolo: bool,
    /// `--afk`.
    pub afk: bool,
    /// `--plan`.
    pub plan: bool,
    /// `--max-steps-per-turn`.
    pub max_steps_per_turn: Option<u64>,
    /// `--max-retries-per-step`.
    pub max_retries_per_step: Option<u64>,
    /// `--max-ralph-iterations`.
    pub max_ralph_iterations: Option<i64>,
    /// `--add-dir`.
    pub add_dirs: Vec<PathBuf>,
    /// `--agent-file`, or a built-in agent's `builtin:` path (`--agent`); the default agent when `None`.
    pub agent_file: Option<PathBuf>,
    /// `--skills-dir`s; when any are given they replace project and user skill discovery.
    pub skills_dirs: Vec<PathBuf>,
    /// MCP configuration documents, already read: `--mcp-config-file`s (or `<share>/mcp.json`), then
    /// `--mcp-config`s.
    pub mcp_sources: Vec<serde_json::Value>,
    /// `--sandbox` (else the configuration's `sandbox_mode`).
    pub sandbox: Option<SandboxMode>,
    /// `--record-llm FILE`.
    pub record_llm: Option<PathBuf>,
}
