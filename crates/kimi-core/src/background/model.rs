//! A task's records, field for field as the reference writes them (`background/models.py`), so either
//! implementation reads the other's `tasks/<id>/*.json`. Unknown fields are ignored and missing ones
//! take the reference's defaults.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Where a task stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    /// Recorded, nothing started yet.
    #[default]
    Created,
    /// Being launched.
    Starting,
    /// Running.
    Running,
    /// A background agent waits for the user to approve something.
    AwaitingApproval,
    /// Ended by itself with success.
    Completed,
    /// Ended with an error, a non-zero exit or its timeout.
    Failed,
    /// Stopped on request.
    Killed,
    /// Its supervisor went away; what became of it is unknown.
    Lost,
}

impl TaskStatus {
    /// The name as written in files and tool output.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Created => "created",
            Self::Starting => "starting",
            Self::Running => "running",
            Self::AwaitingApproval => "awaiting_approval",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Killed => "killed",
            Self::Lost => "lost",
        }
    }

    /// Whether the status is final.
    pub fn is_terminal(self) -> bool {
        match self {
            Self::Completed | Self::Failed | Self::Killed | Self::Lost => true,
            Self::Created | Self::Starting | Self::Running | Self::AwaitingApproval => false,
        }
    }
}

impl std::fmt::Display for TaskStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a task runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TaskKind {
    /// A shell command (`Shell` with `run_in_background`).
    Bash,
    /// A subagent (`Agent` with `run_in_background`).
    Agent,
}

impl TaskKind {
    /// The name as written in files and tool output; also the id prefix.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Bash => "bash",
            Self::Agent => "agent",
        }
    }
}

/// Who created a task. Only the root agent manages tasks; the role is recorded as the reference does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OwnerRole {
    /// The session's main agent.
    Root,
    /// A subagent (the reference's older `fixed_subagent` / `dynamic_subagent` read as this).
    #[serde(alias = "fixed_subagent", alias = "dynamic_subagent")]
    Subagent,
}

/// What a task is (`spec.json`); written once.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskSpec {
    /// Record format version (1).
    #[serde(default = "one")]
    pub version: u32,
    /// `bash-xxxxxxxx` or `agent-xxxxxxxx`.
    pub id: String,
    /// Bash or agent.
    pub kind: TaskKind,
    /// The session it belongs to.
    pub session_id: String,
    /// The model's few words about it.
    pub description: String,
    /// The tool call that started it.
    pub tool_call_id: String,
    /// Who started it.
    #[serde(default = "root")]
    pub owner_role: OwnerRole,
    /// Seconds since the Unix epoch.
    #[serde(default)]
    pub created_at: f64,
    /// Bash: the command line.
    #[serde(default)]
    pub command: Option<String>,
    /// Bash: `bash` (or `sh`).
    #[serde(default)]
    pub shell_name: Option<String>,
    /// Bash: the shell binary.
    #[serde(default)]
    pub shell_path: Option<String>,
    /// Bash: the working directory.
    #[serde(default)]
    pub cwd: Option<String>,
    /// Seconds the task may run.
    #[serde(default)]
    pub timeout_s: Option<u64>,
    /// Kind-specific data (agent tasks: `agent_id`, `subagent_type`, `prompt`, ...).
    #[serde(default)]
    pub kind_payload: Option<Map<String, Value>>,
}

fn one() -> u32 {
    1
}

fn root() -> OwnerRole {
    OwnerRole::Root
}

/// Where a task stands (`runtime.json`); rewritten on every change of status.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskRuntime {
    /// The status.
    #[serde(default)]
    pub status: TaskStatus,
    /// The process supervising the task (the reference's worker; for us, the agent itself).
    #[serde(default)]
    pub worker_pid: Option<u32>,
    /// The shell's pid.
    #[serde(default)]
    pub child_pid: Option<u32>,
    /// The shell's process group (the same number as its pid).
    #[serde(default)]
    pub child_pgid: Option<i32>,
    /// When the command started.
    #[serde(default)]
    pub started_at: Option<f64>,
    /// The supervisor's last sign of life.
    #[serde(default)]
    pub heartbeat_at: Option<f64>,
    /// When this record last changed.
    #[serde(default)]
    pub updated_at: f64,
    /// When the task reached a final status.
    #[serde(default)]
    pub finished_at: Option<f64>,
    /// The exit code; minus the signal number when a signal ended it.
    #[serde(default)]
    pub exit_code: Option<i32>,
    /// Stopped before it ended by itself (killed or timed out).
    #[serde(default)]
    pub interrupted: bool,
    /// Stopped because its timeout passed.
    #[serde(default)]
    pub timed_out: bool,
    /// Why it did not complete.
    #[serde(default)]
    pub failure_reason: Option<String>,
}

impl TaskRuntime {
    /// A fresh record: `created`, updated `now`.
    pub fn new(now: f64) -> Self {
        Self {
            status: TaskStatus::Created,
            worker_pid: None,
            child_pid: None,
            child_pgid: None,
            started_at: None,
            heartbeat_at: None,
            updated_at: now,
            finished_at: None,
            exit_code: None,
            interrupted: false,
            timed_out: false,
            failure_reason: None,
        }
    }

    /// `timed_out` for a task stopped by its timeout, else its status (reference `terminal_reason`).
    pub fn terminal_reason(&self) -> &'static str {
        if self.timed_out {
            "timed_out"
        } else {
            self.status.as_str()
        }
    }
}

impl Default for TaskRuntime {
    fn default() -> Self {
        Self::new(0.0)
    }
}

/// Requests to the task's supervisor (`control.json`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct TaskControl {
    /// When a stop was asked for.
    #[serde(default)]
    pub kill_requested_at: Option<f64>,
    /// Why.
    #[serde(default)]
    pub kill_reason: Option<String>,
    /// Whether to skip the polite signal.
    #[serde(default)]
    pub force: bool,
}

/// What the model has seen of the output (`consumer.json`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct TaskConsumerState {
    /// Output size at the last `TaskOutput`.
    #[serde(default)]
    pub last_seen_output_size: u64,
    /// When that was.
    #[serde(default)]
    pub last_viewed_at: Option<f64>,
}

/// Everything known about one task.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskView {
    /// What it is.
    pub spec: TaskSpec,
    /// Where it stands.
    pub runtime: TaskRuntime,
    /// Stop requests.
    pub control: TaskControl,
    /// What the model has seen.
    pub consumer: TaskConsumerState,
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    #[test]
    fn spec_reads_the_reference_and_writes_its_keys_in_order() {
        let reference = json!({
            "version": 1, "id": "bash-a1b2c3d4", "kind": "bash", "session_id": "s",
            "description": "build", "tool_call_id": "tc", "owner_role": "fixed_subagent",
            "created_at": 1.5, "command": "make", "shell_name": "bash", "shell_path": "/bin/bash",
            "cwd": "/w", "timeout_s": 60, "kind_payload": null, "future_field": true
        });
        let spec: TaskSpec = serde_json::from_value(reference).unwrap();
        assert_eq!(spec.owner_role, OwnerRole::Subagent);
        let written = serde_json::to_value(&spec).unwrap();
        let keys: Vec<&str> = written.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "version",
                "id",
                "kind",
                "session_id",
                "description",
                "tool_call_id",
                "owner_role",
                "created_at",
                "command",
                "shell_name",
                "shell_path",
                "cwd",
                "timeout_s",
                "kind_payload"
            ]
        );
        assert_eq!(written["owner_role"], "subagent");
    }

    #[test]
    fn runtime_defaults_and_key_order() {
        let runtime: TaskRuntime = serde_json::from_value(json!({})).unwrap();
        assert_eq!(runtime, TaskRuntime::new(0.0));
        assert_eq!(
            serde_json::to_string(&TaskRuntime::new(2.0)).unwrap(),
            r#"{"status":"created","worker_pid":null,"child_pid":null,"child_pgid":null,"started_at":null,"heartbeat_at":null,"updated_at":2.0,"finished_at":null,"exit_code":null,"interrupted":false,"timed_out":false,"failure_reason":null}"#
        );
        assert_eq!(
            serde_json::to_string(&TaskControl::default()).unwrap(),
            r#"{"kill_requested_at":null,"kill_reason":null,"force":false}"#
        );
        assert_eq!(
            serde_json::to_string(&TaskConsumerState::default()).unwrap(),
            r#"{"last_seen_output_size":0,"last_viewed_at":null}"#
        );
    }
}
